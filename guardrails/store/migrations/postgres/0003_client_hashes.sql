-- guardrails store, version 3 (PostgreSQL): appends of many rows carry the
-- hashes the client computed after the chain head it last saw.
--
-- The function locks the chain head. When the head is the one the client
-- named, the client's hashes go in as sent: the server checks the head and
-- inserts, nothing more. When another writer moved the head meanwhile (or
-- the client sent no hashes, expecting that), the function hashes each row
-- after the head it locked (sha256 of "previous|id|content", as _chain.link),
-- in the same call. Rows written
-- around the store (an INSERT that did not move the head) are chained after,
-- not collided with: the newest row is the head then, and `guardrails audit
-- verify` names the row that does not match. Answers the new head and whether
-- the client's hint was out of date.
--
-- The function of version 2 (contents, payload) stays, so a process of the
-- previous release keeps appending to the same chain during an upgrade.
CREATE FUNCTION guardrails_audit_append(
    hint_id BIGINT, hint_hash TEXT, hashes TEXT[], contents TEXT[], payload JSON
) RETURNS TABLE (head_id BIGINT, head_hash TEXT, moved BOOLEAN)
LANGUAGE plpgsql AS $$
DECLARE
    -- The rows are read before the head is locked: the lock is held for the
    -- check, the insert and the commit only.
    incoming    guardrails_audit[] := ARRAY(
        SELECT json_populate_record(NULL::guardrails_audit, e.value)
        FROM json_array_elements(payload) WITH ORDINALITY AS e ORDER BY e.ordinality);
    n           INTEGER := COALESCE(array_length(incoming, 1), 0);
    last_id     BIGINT;
    last_hash   TEXT;
    newest_id   BIGINT;
    newest_hash TEXT;
BEGIN
    -- No hashes at all: the client expects the head to have moved.
    IF (n <> COALESCE(array_length(hashes, 1), 0) AND hashes <> '{}')
            OR n <> COALESCE(array_length(contents, 1), 0) THEN
        RAISE EXCEPTION 'guardrails_audit_append: % rows, % hashes, % contents',
            n, COALESCE(array_length(hashes, 1), 0), COALESCE(array_length(contents, 1), 0);
    END IF;
    SELECT h.id, h.hash INTO last_id, last_hash FROM guardrails_audit_head h FOR UPDATE;
    SELECT a.id, a.hash INTO newest_id, newest_hash
        FROM guardrails_audit a ORDER BY a.id DESC LIMIT 1;
    IF newest_id > last_id THEN
        last_id := newest_id;
        last_hash := COALESCE(newest_hash, '');
    END IF;
    moved := last_id IS DISTINCT FROM hint_id OR last_hash IS DISTINCT FROM hint_hash;
    IF moved OR hashes = '{}' THEN
        FOR i IN 1 .. n LOOP
            last_hash := encode(sha256(convert_to(
                last_hash || '|' || (last_id + i)::text || '|' || contents[i], 'UTF8')), 'hex');
            hashes[i] := last_hash;
        END LOOP;
    ELSIF n > 0 THEN
        last_hash := hashes[n];
    END IF;
    INSERT INTO guardrails_audit (id, kind, at, call_id, tenant, session, agent, workflow, tool, outcome, verdict, reason, verdicts, escapes, duration_us, tokens_in, tokens_out, cost, exception, error, detail, altered, hash)
    SELECT last_id + r.ordinality, r.kind, r.at, r.call_id, r.tenant, r.session, r.agent, r.workflow, r.tool, r.outcome, r.verdict, r.reason, r.verdicts, r.escapes, r.duration_us, r.tokens_in, r.tokens_out, r.cost, r.exception, r.error, r.detail, r.altered, hashes[r.ordinality]
    FROM unnest(incoming) WITH ORDINALITY AS r;
    UPDATE guardrails_audit_head SET id = last_id + n, hash = last_hash;
    head_id := last_id + n;
    head_hash := last_hash;
    RETURN NEXT;
END;
$$;
