-- guardrails store, version 6 (PostgreSQL): the newest row, not the chain
-- head table, decides what the next row is chained after.
--
-- The application role may UPDATE guardrails_audit_head (every append moves
-- it), so it can also write a head that no row has: a garbage hash, or an id
-- past the newest row. Before this version, the next honest append hashed
-- after that head and `guardrails audit verify` named the honest row as
-- changed. Both append functions still lock the head (the lock orders the
-- writers; a function reads the rows after taking it, so it sees every row
-- its predecessors committed), then chain after the newest row whenever there
-- is one, and put the head back where the rows say. Same names, arguments and
-- grants; no table changes. (The single-row statement of the store checks the
-- head against its row before it hashes after it: `_pg_sql.APPEND_AFTER_HEAD`.)
CREATE OR REPLACE FUNCTION guardrails_audit_append(
    hint_id BIGINT, hint_hash TEXT, hashes TEXT[], contents TEXT[], payload JSON
) RETURNS TABLE (head_id BIGINT, head_hash TEXT, moved BOOLEAN)
LANGUAGE plpgsql AS $$
DECLARE
    incoming    guardrails_audit[] := ARRAY(
        SELECT json_populate_record(NULL::guardrails_audit, e.value)
        FROM json_array_elements(payload) WITH ORDINALITY AS e ORDER BY e.ordinality);
    n           INTEGER := COALESCE(array_length(incoming, 1), 0);
    last_id     BIGINT;
    last_hash   TEXT;
BEGIN
    IF (n <> COALESCE(array_length(hashes, 1), 0) AND hashes <> '{}')
            OR n <> COALESCE(array_length(contents, 1), 0) THEN
        RAISE EXCEPTION 'guardrails_audit_append: % rows, % hashes, % contents',
            n, COALESCE(array_length(hashes, 1), 0), COALESCE(array_length(contents, 1), 0);
    END IF;
    PERFORM 1 FROM guardrails_audit_head FOR UPDATE;
    SELECT a.id, COALESCE(a.hash, '') INTO last_id, last_hash
        FROM guardrails_audit a ORDER BY a.id DESC LIMIT 1;
    IF last_id IS NULL THEN
        last_id := 0;
        last_hash := '';
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
-- The function of version 2, which processes of that release still call.
CREATE OR REPLACE FUNCTION guardrails_audit_append(contents TEXT[], payload JSONB) RETURNS BIGINT
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
    PERFORM 1 FROM guardrails_audit_head FOR UPDATE;
    SELECT a.id, COALESCE(a.hash, '') INTO last_id, last_hash
        FROM guardrails_audit a ORDER BY a.id DESC LIMIT 1;
    IF last_id IS NULL THEN
        last_id := 0;
        last_hash := '';
    END IF;
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
