-- guardrails store, version 5 (PostgreSQL): a leased reservation gives back
-- what the key's expired leases hold only when the cap refuses it without
-- them. Giving them back first scanned every lease of the key (as many rows
-- as calls in flight on it) on every reservation; an admitted reservation did
-- not need their room. The admissions are those of version 4: giving back
-- only lowers `reserved`, so a reservation admitted without it is admitted
-- with it, and one refused without it is asked again after it. Until then
-- `reserved` still counts the expired leases. No table changes; the
-- function keeps its name, arguments and grants.
CREATE OR REPLACE FUNCTION guardrails_reserve_leased(
    p_key TEXT, p_holder TEXT, p_amount BIGINT, p_cap BIGINT,
    p_now DOUBLE PRECISION, p_until DOUBLE PRECISION
) RETURNS BOOLEAN
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    INSERT INTO guardrails_budgets (key) VALUES (p_key) ON CONFLICT DO NOTHING;
    FOR attempt IN 1..2 LOOP
        WITH admitted AS (
            UPDATE guardrails_budgets SET reserved = reserved + p_amount
            WHERE key = p_key AND spent + reserved < p_cap
                AND spent + reserved + p_amount <= p_cap
            RETURNING key
        )
        INSERT INTO guardrails_leases AS l (key, holder, amount, expires_at)
            SELECT key, p_holder, p_amount, p_until FROM admitted
            ON CONFLICT (key, holder) DO UPDATE
            SET amount = l.amount + excluded.amount, expires_at = excluded.expires_at;
        IF FOUND OR attempt = 2 THEN
            RETURN FOUND;
        END IF;
        -- Refused as things stand: give back what expired leases hold, and ask
        -- again even if there were none here: a reservation racing this one may
        -- have given them back meanwhile (its DELETE took the rows this one's
        -- waited for), and the next statement sees what it committed.
        WITH gone AS (
            DELETE FROM guardrails_leases WHERE key = p_key AND expires_at <= p_now
            RETURNING amount
        )
        UPDATE guardrails_budgets SET reserved = reserved - (SELECT SUM(amount) FROM gone)
            WHERE key = p_key AND EXISTS (SELECT 1 FROM gone);
    END LOOP;
END;
$$;
