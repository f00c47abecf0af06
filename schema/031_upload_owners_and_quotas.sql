-- An upload belongs to the token that began it (other tokens get 404), its
-- parts are kept as they were sent (gzip: a part that inflates 1,000-fold
-- no longer takes 1,000 times its size on disk), and what each token and
-- project holds open is counted for quotas. A completion claims the upload
-- (completing_since) so that one upload makes one run whatever races it.
-- Uploads not yet completed at the upgrade are dropped: kw asks which parts
-- the server holds before it sends, and sends the missing ones again.
DELETE FROM uploads WHERE run_id IS NULL;
DELETE FROM upload_parts;
ALTER TABLE uploads ADD COLUMN token_id bigint REFERENCES api_tokens (id) ON DELETE CASCADE;
ALTER TABLE uploads ADD COLUMN stored_bytes bigint NOT NULL DEFAULT 0;   -- its parts as sent
ALTER TABLE uploads ADD COLUMN decoded_bytes bigint NOT NULL DEFAULT 0;  -- and as they decode
ALTER TABLE uploads ADD COLUMN completing_since timestamptz;
ALTER TABLE upload_parts DROP COLUMN body;
ALTER TABLE upload_parts ADD COLUMN data bytea NOT NULL;
ALTER TABLE upload_parts ADD COLUMN gzip boolean NOT NULL;
ALTER TABLE upload_parts ADD COLUMN decoded_bytes bigint NOT NULL;
ALTER TABLE upload_parts ADD COLUMN sha256 text NOT NULL;  -- of the decoded part, for the client to compare
ALTER TABLE upload_parts ALTER COLUMN data SET STORAGE EXTERNAL;
CREATE INDEX uploads_open_by_token ON uploads (token_id) WHERE run_id IS NULL;
