-- An agent belongs to the token that registered it (its id), not to a token
-- name that any token may carry: one token's agent names are its own, so no
-- project can take a name another project's agent needs, and no token of one
-- project can act as another's agent. A token that replaces a revoked one of
-- the same name, scope and projects takes over its agents (rotation).
ALTER TABLE agents DROP CONSTRAINT agents_name_key;
CREATE UNIQUE INDEX agents_token_name_key ON agents (token_id, name);
