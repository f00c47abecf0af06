-- What a pull request's timed case changed from its base's fingerprint (the
-- report's changed_from_base: the parts that differ, and the base's digest or
-- why it has none), as the agent sent it. Cases stored before have none.
ALTER TABLE cases ADD COLUMN changed_from_base json;
