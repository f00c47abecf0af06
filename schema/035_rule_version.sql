-- The detection rule each run's locations and comparisons were computed with
-- (kw/common/detection.hpp, kRuleVersion; docs/detection.md, "Rule
-- versions"). Every run stored so far was computed with version 1. No
-- default from here on: a run names its version as it is stored.
ALTER TABLE runs ADD COLUMN rule_version smallint NOT NULL DEFAULT 1 CHECK (rule_version >= 1);
ALTER TABLE runs ALTER COLUMN rule_version DROP DEFAULT;
