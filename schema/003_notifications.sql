-- Notifications on verdicts: GitHub commit statuses and signed webhooks, sent
-- from an outbox written in the same transaction as the verdict, so a
-- notification is never lost and never slows ingest.

ALTER TABLE projects
  ADD COLUMN github_repo text CHECK (github_repo IS NULL OR github_repo ~ '^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$'),
  ADD COLUMN webhook_url text;

CREATE TABLE notifications (
  id               bigserial PRIMARY KEY,
  kind             text NOT NULL CHECK (kind IN ('github_status', 'webhook')),
  url              text NOT NULL,
  payload          jsonb NOT NULL,
  attempts         integer NOT NULL DEFAULT 0,
  next_attempt_at  timestamptz NOT NULL DEFAULT now(),
  delivered_at     timestamptz,
  failed_at        timestamptz,
  last_error       text,
  created_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX notifications_due ON notifications (next_attempt_at) WHERE delivered_at IS NULL AND failed_at IS NULL;
