-- The iii adapter's record of eval::completed deliveries (adapter/deliver.c).
-- iii_bindings remembers when a binding (by the engine's id) was first seen, so that a
-- binding the engine replays after a restart keeps its place; iii_deliveries pairs each
-- completion event with each binding it was fired to, so that no pair is fired twice
-- and an event fired into a dead connection stays due. Both are pruned by age.

CREATE TABLE iii_bindings (
    binding_id    text PRIMARY KEY,
    function_id   text NOT NULL,
    evaluation_id text,             -- the binding's filter; NULL = every evaluation
    first_seen_at bigint NOT NULL,  -- Unix ms; an unfiltered binding gets events from here
    last_seen_at  bigint NOT NULL
);

CREATE TABLE iii_deliveries (
    event_id     text NOT NULL,
    binding_id   text NOT NULL,
    delivered_at bigint NOT NULL,
    PRIMARY KEY (event_id, binding_id)
);

CREATE INDEX iii_deliveries_age ON iii_deliveries (delivered_at);
-- The delivery pass reads the events of the retention window.
CREATE INDEX iii_completion_events_created ON completion_events (created_at);
