-- Tokens name the projects they may touch (NULL: every project), and an
-- agent is bound to its token's name, not its id, so a rotated token (a new
-- one under the same name) keeps its agents.
ALTER TABLE api_tokens ADD COLUMN projects text[];
ALTER TABLE agents ADD COLUMN token_name text;
UPDATE agents a SET token_name = t.name FROM api_tokens t WHERE t.id = a.token_id;
ALTER TABLE agents ALTER COLUMN token_name SET NOT NULL;
