-- A commit can be measured again (kw submit --rerun: a new job, the next
-- rerun number), and a push to the default branch of a commit that a pull
-- request measured gets a job and run of its own there, so the default
-- branch's history (the baselines) has it. A job is one measurement of a
-- commit, on the default branch or off it, on a GPU class.
ALTER TABLE jobs ADD COLUMN rerun integer NOT NULL DEFAULT 0 CHECK (rerun >= 0);
ALTER TABLE jobs ADD COLUMN on_default_branch boolean NOT NULL DEFAULT false;
UPDATE jobs j SET on_default_branch = (j.branch = p.default_branch) FROM projects p WHERE p.id = j.project_id;
ALTER TABLE jobs DROP CONSTRAINT jobs_project_id_commit_sha_gpu_class_key;
ALTER TABLE jobs ADD CONSTRAINT jobs_one_per_measurement
  UNIQUE (project_id, commit_sha, gpu_class, on_default_branch, rerun);
