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
-- Every row comes through the chain head: an INSERT without an id fails
-- instead of taking one from the sequence.
ALTER TABLE guardrails_audit ALTER COLUMN id DROP DEFAULT;
-- Appends of many rows go through one function: it reads the rows, then
-- locks the chain head, hashes each row after the previous one (sha256 of
-- "previous|id|content", the text the client computed with _chain.content),
-- inserts the rows and moves the head, all in one statement, so the head's
-- lock is held for the hashing and the insert only.
CREATE FUNCTION guardrails_audit_append(contents TEXT[], payload JSONB) RETURNS BIGINT
LANGUAGE plpgsql AS $$
DECLARE
    incoming  guardrails_audit[] := ARRAY(
        SELECT jsonb_populate_record(NULL::guardrails_audit, e.value)
        FROM jsonb_array_elements(payload) WITH ORDINALITY AS e ORDER BY e.ordinality);
    last_id   BIGINT;
    last_hash TEXT;
    hashes    TEXT[] := '{}';
    n         INTEGER := COALESCE(array_length(contents, 1), 0);
BEGIN
    SELECT h.id, h.hash INTO last_id, last_hash FROM guardrails_audit_head h FOR UPDATE;
    FOR i IN 1 .. n LOOP
        last_hash := encode(sha256(convert_to(
            last_hash || '|' || (last_id + i)::text || '|' || contents[i], 'UTF8')), 'hex');
        hashes := hashes || last_hash;
    END LOOP;
    INSERT INTO guardrails_audit (id, kind, at, call_id, tenant, session, agent, workflow, tool, outcome, verdict, reason, verdicts, escapes, duration_us, tokens_in, tokens_out, cost, exception, error, detail, altered, hash)
    SELECT last_id + r.ordinality, r.kind, r.at, r.call_id, r.tenant, r.session, r.agent, r.workflow, r.tool, r.outcome, r.verdict, r.reason, r.verdicts, r.escapes, r.duration_us, r.tokens_in, r.tokens_out, r.cost, r.exception, r.error, r.detail, r.altered, hashes[r.ordinality]
    FROM unnest(incoming) WITH ORDINALITY AS r;
    UPDATE guardrails_audit_head SET id = last_id + n, hash = last_hash;
    RETURN last_id + n;
END;
$$;
