-- Version 3 of azq's schema: a message's key is its sequence number,
-- which its ID carries (see receipt.go), instead of a random UUID.
-- PostgreSQL appends a new message's seq to the end of its index, where
-- a random UUID landed on a random page of an index of its own: a page
-- to read, and to write to the log in full after each checkpoint, for
-- every Put. The first 8 bytes of the ID are kept with the message
-- (id_rand); a message already in a queue keeps those of its UUID, and
-- its ID changes with the rest: a receipt issued before the upgrade no
-- longer deletes or updates its message, which comes back after its
-- visibility timeout, as after a lost answer.
ALTER TABLE {{schema}}.messages ADD COLUMN id_rand bigint;
UPDATE {{schema}}.messages SET id_rand = ('x' || left(replace(id::text, '-', ''), 16))::bit(64)::bigint;
ALTER TABLE {{schema}}.messages ALTER COLUMN id_rand SET NOT NULL;
ALTER TABLE {{schema}}.messages DROP COLUMN id;
ALTER TABLE {{schema}}.messages ADD PRIMARY KEY (seq);
