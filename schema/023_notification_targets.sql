-- Notifications are delivered per target (a webhook's scheme://host:port,
-- GitHub, GitLab), in order within a target and independently across
-- targets, so one that hangs or fails delays only its own. A target that
-- keeps failing is paused for a while; its state is shown on the project and
-- in /metrics.
ALTER TABLE notifications ADD COLUMN target text;
UPDATE notifications SET target = CASE kind WHEN 'github_status' THEN 'github'
                                            WHEN 'gitlab_status' THEN 'gitlab'
                                            ELSE COALESCE(substring(url from '^[A-Za-z]+://[^/?#]+'), url) END;
ALTER TABLE notifications ALTER COLUMN target SET NOT NULL;
CREATE INDEX notifications_pending_by_target ON notifications (target, id)
  WHERE delivered_at IS NULL AND failed_at IS NULL;

CREATE TABLE notification_targets (
  target                text PRIMARY KEY,
  consecutive_failures  integer NOT NULL DEFAULT 0,
  paused_until          timestamptz,
  last_error            text,
  last_failure_at       timestamptz,
  last_success_at       timestamptz
);
