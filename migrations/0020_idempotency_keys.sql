-- The answers of creating requests sent with an Idempotency-Key (docs/idempotency.md). A
-- key is scoped to the caller's bearer token, the method and the path: `scope` is the
-- SHA-256 of the three, so that no token is stored. `fingerprint` is the SHA-256 of the
-- request's body (its canonical JSON, or its bytes for a CSV or JSON Lines upload).
-- `status` is NULL while the first request runs; then it and the rest are the answer that
-- every later request with the same key and body gets again, for 24 hours.
CREATE TABLE idempotency_keys (
    scope        text NOT NULL,
    key          text NOT NULL,
    fingerprint  text NOT NULL,
    status       integer,
    location     text,
    content_type text,
    body         text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, key)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);

-- Claims (p_scope, p_key) for a request whose body has p_fingerprint: claimed is true
-- when this call made the row (the caller runs the request, then records its answer or
-- forgets the key); otherwise the row as it stands (its fingerprint, and its answer, or
-- a NULL status while the first request still runs). A row past 24 hours, or one that
-- waits for its answer longer than p_stale_ms (its process is gone), is replaced. A few
-- expired rows of other keys go each time, so that the table holds a day of keys.
CREATE FUNCTION evald_idempotency_claim(p_scope text, p_key text, p_fingerprint text,
                                        p_stale_ms integer)
RETURNS TABLE (claimed boolean, fingerprint text, status integer, location text,
               content_type text, body text)
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM idempotency_keys k
     WHERE k.ctid = ANY (ARRAY(SELECT o.ctid FROM idempotency_keys o
                                WHERE o.created_at < now() - interval '24 hours'
                                ORDER BY o.created_at LIMIT 16));
    DELETE FROM idempotency_keys k
     WHERE k.scope = p_scope AND k.key = p_key
       AND (k.created_at < now() - interval '24 hours'
            OR (k.status IS NULL
                AND k.created_at < now() - p_stale_ms * interval '1 millisecond'));
    INSERT INTO idempotency_keys (scope, key, fingerprint)
    VALUES (p_scope, p_key, p_fingerprint)
    ON CONFLICT DO NOTHING;
    IF FOUND THEN
        RETURN QUERY SELECT true, p_fingerprint, NULL::integer, NULL::text, NULL::text,
                            NULL::text;
        RETURN;
    END IF;
    RETURN QUERY SELECT false, k.fingerprint, k.status, k.location, k.content_type, k.body
                   FROM idempotency_keys k
                  WHERE k.scope = p_scope AND k.key = p_key;
END
$$;
