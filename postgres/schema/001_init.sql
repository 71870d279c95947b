-- Version 1 of azq's schema. The schema's name replaces {{schema}}.
--
-- Times are Unix nanoseconds in bigint columns, as the in-memory queue
-- keeps them, so that a time written by a mock clock comes back to the
-- nanosecond and the rules of azq's time range (saturation in 2262, the
-- expiry of a message that never expires) carry over unchanged.
-- 9223372036854775807 (the largest bigint) is the expiry of a message that
-- never expires.

-- The queues, one row each. Names sort bytewise (COLLATE "C"), as Go's
-- strings do, for List Queues. Metadata names and values are two arrays of
-- the same length; values are bytes, as a metadata value over REST may
-- hold bytes that are not UTF-8.
CREATE TABLE {{schema}}.queues (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name            text COLLATE "C" NOT NULL UNIQUE,
    metadata_names  text[] NOT NULL DEFAULT '{}',
    metadata_values bytea[] NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL DEFAULT now()
);

-- The stored access policies of a queue, in the order they were set.
-- Start and expiry are Unix seconds and nanoseconds (NULL: not set), which
-- hold any time a Go program can name.
CREATE TABLE {{schema}}.access_policies (
    queue_id    bigint NOT NULL REFERENCES {{schema}}.queues (id) ON DELETE CASCADE,
    position    smallint NOT NULL,
    id          bytea NOT NULL,
    start_sec   bigint,
    start_nsec  integer,
    expiry_sec  bigint,
    expiry_nsec integer,
    permission  text NOT NULL,
    PRIMARY KEY (queue_id, position)
);

-- The messages of every queue. A message belongs to the queue whose id it
-- carries; queue ids are never reused, so the messages of a deleted queue
-- are unreachable at once, and are removed in batches after it (see
-- dropped_queues). There is no foreign key to queues: checking it would
-- lock the queue's row for every Put, which serializes the Puts of one
-- queue.
--
-- seq orders insertion. Get takes messages in the order of
-- (visible_at, seq) through messages_visible; version and tag are the
-- parts of the current pop receipt that must match (version counts Gets
-- and Updates, modulo 2^32; tag is random).
CREATE TABLE {{schema}}.messages (
    id            uuid PRIMARY KEY,
    queue_id      bigint NOT NULL,
    seq           bigint GENERATED ALWAYS AS IDENTITY,
    inserted_at   bigint NOT NULL,
    visible_at    bigint NOT NULL,
    expires_at    bigint NOT NULL,
    dequeue_count bigint NOT NULL DEFAULT 0,
    version       bigint NOT NULL DEFAULT 0,
    tag           bigint NOT NULL,
    content       bytea NOT NULL
) WITH (
    -- A queue's table turns over fast: vacuum it after a small share of
    -- its rows has changed, not the default fifth.
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_analyze_scale_factor = 0.02
);

CREATE INDEX messages_visible ON {{schema}}.messages (queue_id, visible_at, seq);

-- Expired messages are never returned (every statement compares
-- expires_at with now); this index finds them for removal, in batches.
-- Messages that never expire, or whose expiry lies past 2262, are left
-- out.
CREATE INDEX messages_expiry ON {{schema}}.messages (expires_at)
    WHERE expires_at < 9223372036854775806;

-- Queues deleted whose messages may not all be removed yet: a deletion
-- removes them in batches after the queue's row, and an interrupted one is
-- finished by the next Service that purges.
CREATE TABLE {{schema}}.dropped_queues (
    id         bigint PRIMARY KEY,
    dropped_at timestamptz NOT NULL DEFAULT now()
);

-- The queues some Service waits on in Receive, by the backend process id
-- of the connection on which it listens for notifications. Put and Update
-- notify only while a queue has a row here, so that the commits of a busy
-- queue that nobody waits on are not serialized by NOTIFY. Unlogged: a
-- crash of the server empties it, and every Service then registers again
-- as it reconnects.
CREATE UNLOGGED TABLE {{schema}}.waiters (
    queue_name text COLLATE "C" NOT NULL,
    pid        integer NOT NULL,
    PRIMARY KEY (queue_name, pid)
);

-- t + d, saturating below 9223372036854775807 so that a finite time-to-
-- live never turns into "never", as the in-memory queue adds.
CREATE FUNCTION {{schema}}.add_ns(t bigint, d bigint) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT CASE WHEN d > 9223372036854775806 - t THEN 9223372036854775806 ELSE t + d END $$;
