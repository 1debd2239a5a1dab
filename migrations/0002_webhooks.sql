-- Webhook subscriptions of eval::completed and their durable outbox: one delivery per
-- (event, subscription), each with a log of its attempts. Delivery threads fan the
-- completion events out to the subscriptions that existed when the event was recorded,
-- then claim due deliveries with FOR UPDATE SKIP LOCKED and a lease, so several evald
-- processes deliver each attempt once. See docs/webhooks.md.

-- One order shared by subscriptions and events: a subscription receives the events
-- recorded after it (subscriptions.seq < completion_events.webhook_seq).
CREATE SEQUENCE webhook_seq;

CREATE TABLE subscriptions (
    id            text PRIMARY KEY,                 -- sub_ + 32 hex
    url           text NOT NULL,
    evaluation_id text,                             -- NULL = every evaluation
    -- The signing secret sealed with AES-256-GCM under EVALD_SECRET_KEY (the subscription
    -- id is the associated data). The plain secret is never stored.
    secret_sealed text NOT NULL CHECK (secret_sealed LIKE 'v1:%'),
    seq           bigint NOT NULL,
    created_at    bigint NOT NULL
);

CREATE INDEX subscriptions_newest ON subscriptions (created_at DESC, id DESC);

-- Fan-out bookkeeping on the events the engine writes. Events recorded before this
-- migration predate every subscription and are marked done.
ALTER TABLE completion_events
    ADD COLUMN webhook_seq bigint NOT NULL DEFAULT nextval('webhook_seq'),
    ADD COLUMN webhooks_pending boolean NOT NULL DEFAULT true;
UPDATE completion_events SET webhooks_pending = false;
CREATE INDEX completion_events_webhooks_pending ON completion_events (webhook_seq)
    WHERE webhooks_pending;

CREATE TABLE webhook_deliveries (
    id               text PRIMARY KEY,              -- dlv_ + 32 hex
    subscription_id  text NOT NULL REFERENCES subscriptions (id) ON DELETE CASCADE,
    event_id         text NOT NULL REFERENCES completion_events (event_id) ON DELETE CASCADE,
    evaluation_id    text NOT NULL,
    status           text NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         integer NOT NULL DEFAULT 0,    -- attempts started
    next_attempt_at  timestamptz,                   -- due time while pending
    lease_owner      text,                          -- process making the current attempt
    lease_until      timestamptz,
    created_at       bigint NOT NULL,
    last_attempt_at  bigint,
    last_status_code integer,
    last_error       text,
    delivered_at     bigint,
    UNIQUE (event_id, subscription_id)
);

CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
    WHERE status = 'pending';
CREATE INDEX webhook_deliveries_newest
    ON webhook_deliveries (subscription_id, created_at DESC, id DESC);

CREATE TABLE webhook_attempts (
    delivery_id text NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    attempt     integer NOT NULL,
    started_at  bigint NOT NULL,
    duration_ms integer NOT NULL,
    status_code integer,                            -- NULL when no answer came back
    error       text,                               -- NULL on a 2xx
    PRIMARY KEY (delivery_id, attempt)
);
