-- guardrails store, version 4 (PostgreSQL): the operations that needed a
-- transaction of several statements are one statement each, a function:
-- one round trip and one commit, where the client sent a pipeline (BEGIN,
-- the statements, COMMIT) that took eleven waits on the socket. No table
-- changes.
--
-- A leased reservation. The three statements the client sent as one transaction (create the budget
-- row; give back what expired leases held, which locks the budget row; then
-- reserve and lease if the cap admits it) run in one function: one statement,
-- one round trip, one commit, the same row locks taken in the same order. A
-- VOLATILE function reads with a new snapshot per statement, so the admission
-- sees the budget row as the lock found it, as before. Answers whether the
-- reservation was admitted. The statements of version 3 stay valid, so a
-- process of the previous release keeps reserving on the same rows during an
-- upgrade.
CREATE FUNCTION guardrails_reserve_leased(
    p_key TEXT, p_holder TEXT, p_amount BIGINT, p_cap BIGINT,
    p_now DOUBLE PRECISION, p_until DOUBLE PRECISION
) RETURNS BOOLEAN
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    INSERT INTO guardrails_budgets (key) VALUES (p_key) ON CONFLICT DO NOTHING;
    WITH gone AS (
        DELETE FROM guardrails_leases WHERE key = p_key AND expires_at <= p_now
        RETURNING amount
    )
    UPDATE guardrails_budgets SET reserved = reserved - (SELECT COALESCE(SUM(amount), 0) FROM gone)
        WHERE key = p_key;
    WITH admitted AS (
        UPDATE guardrails_budgets SET reserved = reserved + p_amount
        WHERE key = p_key AND spent + reserved < p_cap AND spent + reserved + p_amount <= p_cap
        RETURNING key
    )
    INSERT INTO guardrails_leases AS l (key, holder, amount, expires_at)
        SELECT key, p_holder, p_amount, p_until FROM admitted
        ON CONFLICT (key, holder) DO UPDATE
        SET amount = l.amount + excluded.amount, expires_at = excluded.expires_at;
    RETURN FOUND;
END;
$$;

-- A snapshot's next version. The advisory lock on the key serialises the
-- writers of one key; the version is read by the statement after it, so with
-- a snapshot of its own (READ COMMITTED, VOLATILE), it sees the version the
-- writer before committed. The two statements of version 3 stay valid.
CREATE FUNCTION guardrails_put_snapshot(
    p_key TEXT, p_at DOUBLE PRECISION, p_data BYTEA
) RETURNS INTEGER
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    written INTEGER;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtext(p_key));
    INSERT INTO guardrails_snapshots (key, version, at, data)
        VALUES (
            p_key,
            (SELECT COALESCE(MAX(version), 0) + 1 FROM guardrails_snapshots WHERE key = p_key),
            p_at,
            p_data
        )
        RETURNING version INTO written;
    RETURN written;
END;
$$;
