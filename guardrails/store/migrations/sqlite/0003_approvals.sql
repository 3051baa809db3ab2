-- guardrails store, version 3 (SQLite): approval requests and their decisions.
-- scope is the JSON array [tenant, session, tool, digest]; status is the stored
-- one (expired is a pending or approved request past expires_at).
CREATE TABLE guardrails_approvals (
    id           TEXT PRIMARY KEY,
    scope        TEXT NOT NULL,
    tenant       TEXT,
    session      TEXT,
    tool         TEXT NOT NULL,
    digest       TEXT NOT NULL,
    arguments    TEXT NOT NULL,
    asked_by     TEXT,
    requested_at REAL NOT NULL,
    expires_at   REAL NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'used')),
    decided_by   TEXT,
    decided_at   REAL,
    reason       TEXT,
    used_at      REAL
) WITHOUT ROWID;
CREATE INDEX guardrails_approvals_scope ON guardrails_approvals (scope, requested_at);
CREATE INDEX guardrails_approvals_requested ON guardrails_approvals (requested_at);
