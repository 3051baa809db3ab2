-- guardrails store, version 2 (SQLite): the audit hash chain, altered columns,
-- no row replaced by INSERT OR REPLACE / REPLACE INTO / upsert, leased reservations.
ALTER TABLE guardrails_audit ADD COLUMN altered TEXT;
ALTER TABLE guardrails_audit ADD COLUMN hash TEXT;
-- REPLACE deletes the old row without firing the delete trigger unless
-- recursive_triggers is on; refuse any insert that names an existing id.
CREATE TRIGGER guardrails_audit_no_replace BEFORE INSERT ON guardrails_audit
WHEN EXISTS (SELECT 1 FROM guardrails_audit WHERE id = NEW.id)
BEGIN
    SELECT RAISE(ABORT, 'guardrails_audit is append-only');
END;
-- One row per live reservation; a reservation whose lease expired is given back.
CREATE TABLE guardrails_leases (
    key        TEXT NOT NULL,
    holder     TEXT NOT NULL,
    amount     INTEGER NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (key, holder)
) WITHOUT ROWID;
CREATE INDEX guardrails_leases_holder ON guardrails_leases (holder);
