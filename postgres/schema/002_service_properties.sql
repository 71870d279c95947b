-- Version 2 of azq's schema: the service properties of the account whose
-- queues the schema holds (CORS rules, logging and metrics settings), as
-- azq's REST server reads and writes them, so that every server on the
-- schema answers with the same ones. One row, made here; document is the
-- StorageServiceProperties XML that Get Queue Service Properties answers
-- with, or NULL until someone sets them: a new account's.
CREATE TABLE {{schema}}.service_properties (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    document  bytea
);

INSERT INTO {{schema}}.service_properties DEFAULT VALUES;
