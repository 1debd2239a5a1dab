-- experiment.completed beside evaluation.completed (issue 16): the outbox of completion
-- events carries both, subscriptions choose which they receive, and the iii adapter
-- fires eval::experiment::completed to the bindings of that trigger type. docs/webhooks.md
-- and docs/iii.md describe the protocol; store/events.h is what the engine calls.

-- An event is about exactly one subject: an evaluation (evaluation.completed, as before)
-- or an experiment (experiment.completed). Each subject has at most one event.
ALTER TABLE completion_events
    ADD COLUMN event_type text NOT NULL DEFAULT 'evaluation.completed'
        CHECK (event_type IN ('evaluation.completed', 'experiment.completed')),
    ADD COLUMN experiment_id text UNIQUE,
    ALTER COLUMN evaluation_id DROP NOT NULL,
    ADD CONSTRAINT completion_events_one_subject CHECK (
        (event_type = 'evaluation.completed' AND evaluation_id IS NOT NULL
         AND experiment_id IS NULL)
        OR (event_type = 'experiment.completed' AND experiment_id IS NOT NULL
            AND evaluation_id IS NULL));

-- Which events a subscription receives: a non-empty set of known event types. Existing
-- subscriptions keep receiving what they received.
ALTER TABLE subscriptions
    ADD COLUMN events text[] NOT NULL DEFAULT '{evaluation.completed}'
        CHECK (cardinality(events) >= 1
               AND events <@ '{evaluation.completed,experiment.completed}'::text[]);

-- A delivery names its event's type and subject, like the event.
ALTER TABLE webhook_deliveries
    ADD COLUMN event_type text NOT NULL DEFAULT 'evaluation.completed',
    ADD COLUMN experiment_id text,
    ALTER COLUMN evaluation_id DROP NOT NULL;

-- The adapter's bindings remember their trigger type and, for the experiment trigger,
-- the experiment filter.
ALTER TABLE iii_bindings
    ADD COLUMN trigger_type text NOT NULL DEFAULT 'eval::completed',
    ADD COLUMN experiment_id text;
