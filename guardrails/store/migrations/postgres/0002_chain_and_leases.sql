-- guardrails store, version 2 (PostgreSQL): the audit hash chain, altered
-- columns, TRUNCATE refused, leased reservations.
ALTER TABLE guardrails_audit ADD COLUMN altered TEXT;
ALTER TABLE guardrails_audit ADD COLUMN hash TEXT;
-- The row trigger of version 1 does not fire on TRUNCATE.
CREATE TRIGGER guardrails_audit_no_truncate BEFORE TRUNCATE ON guardrails_audit
    FOR EACH STATEMENT EXECUTE FUNCTION guardrails_audit_append_only();
-- One row per live reservation; a reservation whose lease expired is given back.
CREATE TABLE guardrails_leases (
    key        TEXT NOT NULL,
    holder     TEXT NOT NULL,
    amount     BIGINT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (key, holder)
);
CREATE INDEX guardrails_leases_holder ON guardrails_leases (holder);
-- The chain head: the last row's id and hash. Appends lock this one row, so
-- concurrent writers extend one chain; ids are given from it, not the sequence.
CREATE TABLE guardrails_audit_head (
    one  BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    id   BIGINT NOT NULL,
    hash TEXT NOT NULL
);
INSERT INTO guardrails_audit_head (id, hash) SELECT COALESCE(MAX(id), 0), '' FROM guardrails_audit;
