-- A part of an upload is up to 16 MiB of JSON that waits at most a day for
-- its upload to complete. PostgreSQL's pglz compressing it took 490 ms of an
-- 8 MiB part's PUT, and reading it back at completion paid again, for disk
-- held only until then: kept out of line, uncompressed.
ALTER TABLE upload_parts ALTER COLUMN body SET STORAGE EXTERNAL;
