-- kw-server posts commit statuses to GitLab as it does to GitHub, so an
-- asynchronous GitLab job needs no runner waiting for the verdict. The
-- project is named by its numeric id or its path ("group/sub/name").
ALTER TABLE projects
  ADD COLUMN gitlab_project text
    CHECK (gitlab_project IS NULL OR gitlab_project ~ '^([0-9]+|[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)+)$');

ALTER TABLE notifications DROP CONSTRAINT notifications_kind_check;
ALTER TABLE notifications
  ADD CONSTRAINT notifications_kind_check CHECK (kind IN ('github_status', 'gitlab_status', 'webhook'));
