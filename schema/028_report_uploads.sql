-- Run reports sent in parts (docs/api.md, "Reports in parts"), for reports
-- larger than one request may be. The parts wait here, on whichever server
-- took them, until the client completes the upload; completing ingests the
-- whole report in one transaction, so a run is never visible in part. An
-- upload abandoned or completed is removed a day after it was last touched.
CREATE TABLE uploads (
  project_id  bigint NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
  id          text NOT NULL,  -- the client's: the same report resent names the same upload
  parts       integer NOT NULL CHECK (parts BETWEEN 1 AND 1000),
  touched_at  timestamptz NOT NULL DEFAULT now(),
  run_id      bigint REFERENCES runs (id) ON DELETE SET NULL,  -- set once completed
  PRIMARY KEY (project_id, id)
);

CREATE TABLE upload_parts (
  project_id  bigint NOT NULL,
  upload_id   text NOT NULL,
  part        integer NOT NULL,
  body        text NOT NULL,  -- the part's JSON as decoded
  PRIMARY KEY (project_id, upload_id, part),
  FOREIGN KEY (project_id, upload_id) REFERENCES uploads (project_id, id) ON DELETE CASCADE
);

CREATE INDEX uploads_touched ON uploads (touched_at);
