-- kw-server caches the answers of its heaviest reads (a case's series, a
-- project's overview) and must drop them when the rows behind them change,
-- whichever path or replica wrote them. Each statement that writes those
-- rows notifies channel kw_changes with the name of every project it
-- touched; the notification goes out at commit, to every listening server.
CREATE FUNCTION kw_notify_changed_projects() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('kw_changes', p.name)
  FROM projects p
  WHERE p.id IN (SELECT DISTINCT project_id FROM changed);
  RETURN NULL;
END $$;

-- comparisons carry no project id: theirs is their run's.
CREATE FUNCTION kw_notify_changed_comparisons() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('kw_changes', p.name)
  FROM projects p
  WHERE p.id IN (SELECT DISTINCT r.project_id FROM changed c JOIN runs r ON r.id = c.run_id);
  RETURN NULL;
END $$;

CREATE FUNCTION kw_notify_changed_project_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('kw_changes', name) FROM (SELECT DISTINCT name FROM changed) AS n;
  RETURN NULL;
END $$;

-- A trigger with a transition table takes one event, hence three per table.
CREATE TRIGGER runs_inserted AFTER INSERT ON runs REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION kw_notify_changed_projects();
CREATE TRIGGER runs_updated AFTER UPDATE ON runs REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION kw_notify_changed_projects();
CREATE TRIGGER runs_deleted AFTER DELETE ON runs REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION kw_notify_changed_projects();

CREATE TRIGGER cases_inserted AFTER INSERT ON cases REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION kw_notify_changed_projects();
CREATE TRIGGER cases_updated AFTER UPDATE ON cases REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION kw_notify_changed_projects();
CREATE TRIGGER cases_deleted AFTER DELETE ON cases REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION kw_notify_changed_projects();

CREATE TRIGGER comparisons_inserted AFTER INSERT ON comparisons REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION kw_notify_changed_comparisons();
CREATE TRIGGER comparisons_updated AFTER UPDATE ON comparisons REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION kw_notify_changed_comparisons();
CREATE TRIGGER comparisons_deleted AFTER DELETE ON comparisons REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION kw_notify_changed_comparisons();

CREATE TRIGGER projects_updated AFTER UPDATE ON projects REFERENCING NEW TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION kw_notify_changed_project_rows();
CREATE TRIGGER projects_deleted AFTER DELETE ON projects REFERENCING OLD TABLE AS changed
  FOR EACH STATEMENT EXECUTE FUNCTION kw_notify_changed_project_rows();
