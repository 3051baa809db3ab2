-- guardrails store, version 1 (SQLite)
CREATE TABLE guardrails_audit (
    id          INTEGER PRIMARY KEY,
    kind        TEXT NOT NULL,
    at          REAL NOT NULL,
    call_id     TEXT,
    tenant      TEXT,
    session     TEXT,
    agent       TEXT,
    workflow    TEXT,
    tool        TEXT,
    outcome     TEXT,
    verdict     TEXT,
    reason      TEXT,
    verdicts    TEXT,
    escapes     TEXT,
    duration_us INTEGER,
    tokens_in   INTEGER,
    tokens_out  INTEGER,
    cost        REAL,
    exception   TEXT,
    error       TEXT,
    detail      TEXT
);
-- No secondary indexes: each one adds a page to every commit's WAL write, and
-- rows are appended far more often than they are read. Ids only grow (rows are
-- never deleted). For heavy post-mortems: CREATE INDEX ... ON guardrails_audit (session, id).
CREATE TRIGGER guardrails_audit_no_update BEFORE UPDATE ON guardrails_audit
BEGIN
    SELECT RAISE(ABORT, 'guardrails_audit is append-only');
END;
CREATE TRIGGER guardrails_audit_no_delete BEFORE DELETE ON guardrails_audit
BEGIN
    SELECT RAISE(ABORT, 'guardrails_audit is append-only');
END;
CREATE TABLE guardrails_counters (
    key   TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE guardrails_budgets (
    key      TEXT PRIMARY KEY,
    spent    INTEGER NOT NULL DEFAULT 0,
    reserved INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE guardrails_kv (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE guardrails_idempotency (
    key        TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    state      TEXT NOT NULL,
    result     TEXT,
    expires_at REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE guardrails_snapshots (
    key     TEXT NOT NULL,
    version INTEGER NOT NULL,
    at      REAL NOT NULL,
    data    BLOB NOT NULL,
    PRIMARY KEY (key, version)
) WITHOUT ROWID;
