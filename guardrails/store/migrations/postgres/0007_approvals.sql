-- guardrails store, version 7 (PostgreSQL): approval requests and their decisions.
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
    requested_at DOUBLE PRECISION NOT NULL,
    expires_at   DOUBLE PRECISION NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'used')),
    decided_by   TEXT,
    decided_at   DOUBLE PRECISION,
    reason       TEXT,
    used_at      DOUBLE PRECISION
);
CREATE INDEX guardrails_approvals_scope ON guardrails_approvals (scope, requested_at);
CREATE INDEX guardrails_approvals_requested ON guardrails_approvals (requested_at);
--
-- A call that needs approval, in one function (one statement, one commit):
-- under the scope's advisory lock, consume the oldest live approval (run),
-- else report the newest live pending or denied request, else open the new
-- one (requested, or expired when the newest request of the scope lapsed
-- unused). The lock serialises the retries of one call across processes and
-- replicas: two retries of one approved call never both run. Answers the
-- state and the id of the request it concerns.
CREATE FUNCTION guardrails_approval_admit(
    p_id TEXT, p_scope TEXT, p_tenant TEXT, p_session TEXT, p_tool TEXT, p_digest TEXT,
    p_arguments TEXT, p_asked_by TEXT, p_requested_at DOUBLE PRECISION,
    p_expires_at DOUBLE PRECISION, p_now DOUBLE PRECISION
) RETURNS TABLE (o_state TEXT, o_id TEXT)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    found_id     TEXT;
    found_status TEXT;
    newest       guardrails_approvals%ROWTYPE;
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p_scope, 7));
    UPDATE guardrails_approvals a SET status = 'used', used_at = p_now
        WHERE a.id = (SELECT b.id FROM guardrails_approvals b
                      WHERE b.scope = p_scope AND b.status = 'approved' AND b.expires_at > p_now
                      ORDER BY b.requested_at, b.id LIMIT 1)
          AND a.status = 'approved'
        RETURNING a.id INTO found_id;
    IF found_id IS NOT NULL THEN
        RETURN QUERY SELECT 'run'::TEXT, found_id;
        RETURN;
    END IF;
    SELECT b.id, b.status INTO found_id, found_status FROM guardrails_approvals b
        WHERE b.scope = p_scope AND b.status IN ('pending', 'denied') AND b.expires_at > p_now
        ORDER BY b.requested_at DESC, b.id DESC LIMIT 1;
    IF found_id IS NOT NULL THEN
        RETURN QUERY SELECT found_status, found_id;
        RETURN;
    END IF;
    SELECT * INTO newest FROM guardrails_approvals b WHERE b.scope = p_scope
        ORDER BY b.requested_at DESC, b.id DESC LIMIT 1;
    INSERT INTO guardrails_approvals (id, scope, tenant, session, tool, digest, arguments,
            asked_by, requested_at, expires_at, status)
        VALUES (p_id, p_scope, p_tenant, p_session, p_tool, p_digest, p_arguments,
            p_asked_by, p_requested_at, p_expires_at, 'pending');
    RETURN QUERY SELECT CASE WHEN newest.id IS NOT NULL AND newest.status IN ('pending', 'approved')
                             AND newest.expires_at <= p_now THEN 'expired' ELSE 'requested' END,
                        p_id;
END;
$$;
