-- guardrails store, version 1 (PostgreSQL)
CREATE TABLE guardrails_audit (
    id          BIGSERIAL PRIMARY KEY,
    kind        TEXT NOT NULL,
    at          DOUBLE PRECISION NOT NULL,
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
    duration_us BIGINT,
    tokens_in   BIGINT,
    tokens_out  BIGINT,
    cost        DOUBLE PRECISION,
    exception   TEXT,
    error       TEXT,
    detail      TEXT
);
CREATE INDEX guardrails_audit_session ON guardrails_audit (session, id);
CREATE INDEX guardrails_audit_call ON guardrails_audit (call_id);
CREATE FUNCTION guardrails_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'guardrails_audit is append-only';
END;
$$;
CREATE TRIGGER guardrails_audit_no_change BEFORE UPDATE OR DELETE ON guardrails_audit
    FOR EACH ROW EXECUTE FUNCTION guardrails_audit_append_only();
CREATE TABLE guardrails_counters (
    key   TEXT PRIMARY KEY,
    value BIGINT NOT NULL
);
CREATE TABLE guardrails_budgets (
    key      TEXT PRIMARY KEY,
    spent    BIGINT NOT NULL DEFAULT 0,
    reserved BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE guardrails_kv (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE guardrails_idempotency (
    key        TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    state      TEXT NOT NULL,
    result     TEXT,
    expires_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE guardrails_snapshots (
    key     TEXT NOT NULL,
    version INTEGER NOT NULL,
    at      DOUBLE PRECISION NOT NULL,
    data    BYTEA NOT NULL,
    PRIMARY KEY (key, version)
);
