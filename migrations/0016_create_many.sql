-- Several evaluations created in one statement and one transaction: the batch of the
-- engine's starter thread (engine/starter.c), which takes the starts that arrive while the
-- previous batch is written. Each was a transaction of its own, and its first runs' claims
-- were one more each: 1,024 starts at once took about 1.1 s, most of it PostgreSQL's
-- commits and round trips, and their commits queued behind each other's notifications
-- (a transaction that notifies holds a lock of the database's from its commit until the
-- commit is flushed). p_items is an array of {id, request, concurrency, source, runs}
-- with evald_create's parameters (migrations/0007). Rows: one per element (o_index, 1-based,
-- and o_result, the jobs evald_create enqueued; the claim's columns NULL), then up to
-- p_claims claims (evald_claim_many, migrations/0015) for the idle workers the starter
-- reserved (o_index NULL).
CREATE FUNCTION evald_create_many(p_items jsonb, p_now bigint, p_owner text, p_claims integer,
                                  p_lease_ms bigint, p_max_attempts integer)
RETURNS TABLE (o_index integer, o_result integer, o_outcome text, o_job_id bigint,
               o_kind text, o_evaluation_id text, o_run_position integer,
               o_job_attempts integer, o_ref text, o_attempt integer)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT x.ord::integer AS i, x.v FROM jsonb_array_elements(p_items)
             WITH ORDINALITY AS x(v, ord) ORDER BY x.ord LOOP
        o_index := r.i;
        o_result := evald_create(r.v->>'id', r.v->'request', (r.v->>'concurrency')::integer,
                                 coalesce(r.v->>'source', ''), r.v->'runs', p_now, p_owner);
        RETURN NEXT;
    END LOOP;
    RETURN QUERY SELECT NULL::integer, NULL::integer, c.*
                 FROM evald_claim_many(p_owner, p_lease_ms, p_now, p_max_attempts,
                                       p_claims) c;
END
$$;
