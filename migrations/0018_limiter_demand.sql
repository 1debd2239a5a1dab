-- What each process asks of the provider limits it knows, so that the processes of a
-- database split a limit they share in proportion to it (harness/ratelimit.h,
-- evd_rl_part): the keeper of every process reports its figures a few times a second and
-- reads the others'. A row is a process's last report; one older than the caller's
-- freshness window is not counted (its process stopped, or lost the database), and one
-- older than a minute is deleted. The figures are worth a few seconds: unlogged, so that
-- trading them costs no WAL, and a crash of PostgreSQL empties the table.
CREATE UNLOGGED TABLE limiter_demand (
    provider text NOT NULL,
    model    text NOT NULL,
    owner    text NOT NULL,
    demand   integer NOT NULL,
    seen_at  timestamptz NOT NULL,
    PRIMARY KEY (provider, model, owner)
);

-- Records p_owner's demands (an array of {provider, model, demand}) and answers, for each
-- of them, the demands of the other processes that reported some within p_fresh_ms.
-- Committed asynchronously: the figures are worth less than a flush.
CREATE FUNCTION evald_limiter_exchange(p_owner text, p_demands jsonb, p_fresh_ms integer)
RETURNS TABLE (o_provider text, o_model text, o_others integer[])
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    INSERT INTO limiter_demand (provider, model, owner, demand, seen_at)
    SELECT x.provider, x.model, p_owner, greatest(x.demand, 0), now()
    FROM jsonb_to_recordset(p_demands) AS x(provider text, model text, demand integer)
    ON CONFLICT (provider, model, owner)
        DO UPDATE SET demand = EXCLUDED.demand, seen_at = EXCLUDED.seen_at;
    DELETE FROM limiter_demand WHERE seen_at < now() - interval '1 minute';
    RETURN QUERY
    SELECT x.provider, x.model,
           coalesce(array_agg(d.demand) FILTER (WHERE d.owner IS NOT NULL), '{}')
    FROM jsonb_to_recordset(p_demands) AS x(provider text, model text, demand integer)
    LEFT JOIN limiter_demand d ON d.provider = x.provider AND d.model = x.model
        AND d.owner <> p_owner AND d.demand > 0
        AND d.seen_at > now() - make_interval(secs => p_fresh_ms / 1000.0)
    GROUP BY x.provider, x.model;
END
$$;
