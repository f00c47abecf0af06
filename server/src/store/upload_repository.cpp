#include "store/upload_repository.hpp"

#include "errors.hpp"

namespace kw::server {

namespace {

// The upload row locked, so parts arriving at once on several servers count
// each other's bytes; `created` tells a new upload (which quota counts count).
constexpr const char* kLockUpload = R"sql(
INSERT INTO uploads (project_id, id, parts, token_id) VALUES ($1, $2, $3, $4)
ON CONFLICT (project_id, id) DO UPDATE SET touched_at = now(), shard_job_id = NULL
RETURNING parts, run_id, token_id, completing_since IS NOT NULL, xmax = 0 AS created
)sql";

constexpr const char* kOpenOfToken = R"sql(
SELECT count(*), COALESCE(sum(stored_bytes), 0)::bigint FROM uploads
WHERE token_id = $1 AND run_id IS NULL AND shard_job_id IS NULL AND NOT (project_id = $2 AND id = $3)
)sql";

constexpr const char* kOpenOfProject = R"sql(
SELECT count(*), COALESCE(sum(stored_bytes), 0)::bigint FROM uploads
WHERE project_id = $1 AND run_id IS NULL AND shard_job_id IS NULL AND id <> $2
)sql";

// A completion that died (its server or its database killed) frees its
// claim after kCompletionClaimSeconds.
constexpr const char* kUploadClaim = R"sql(
UPDATE uploads SET completing_since = clock_timestamp(), touched_at = now()
WHERE project_id = $1 AND id = $2 AND token_id = $3 AND run_id IS NULL
  AND (completing_since IS NULL OR completing_since < clock_timestamp() - make_interval(secs => $4))
RETURNING id
)sql";

OpenTotals totals(const pqxx::row& row) {
  return {row[0].as<std::int64_t>(), row[1].as<std::int64_t>()};
}

}  // namespace

std::optional<UploadState> UploadRepository::state(pqxx::work& tx, std::int64_t project_id,
                                                   std::int64_t token_id, const std::string& upload) {
  pqxx::result head =
      tx.exec_params("SELECT parts, run_id FROM uploads WHERE project_id = $1 AND id = $2 AND token_id = $3",
                     project_id, upload, token_id);
  if (head.empty()) return std::nullopt;
  UploadState state;
  state.parts = head[0][0].as<int>();
  if (!head[0][1].is_null()) state.run_id = head[0][1].as<std::int64_t>();
  for (const auto& row :
       tx.exec_params("SELECT part, decoded_bytes, sha256, octet_length(data) FROM upload_parts "
                      "WHERE project_id = $1 AND upload_id = $2 ORDER BY part",
                      project_id, upload)) {
    state.received.push_back({row[0].as<int>(), row[1].as<std::int64_t>(), row[2].as<std::string>()});
    state.bytes += row[1].as<std::int64_t>();
    state.stored_bytes += row[3].as<std::int64_t>();
  }
  return state;
}

UploadState UploadRepository::put_part(pqxx::work& tx, std::int64_t project_id, std::int64_t token_id,
                                       const std::string& upload, int part, int parts, const PartBody& body,
                                       const PartCheck& check) {
  pqxx::row locked = tx.exec_params1(kLockUpload, project_id, upload, parts, token_id);
  PartFacts facts;
  if (!locked[2].is_null()) facts.token_id = locked[2].as<std::int64_t>();
  facts.parts = locked[0].as<int>();
  if (!locked[1].is_null()) facts.run_id = locked[1].as<std::int64_t>();
  facts.completing = locked[3].as<bool>();
  facts.created = locked[4].as<bool>();
  const pqxx::row others = tx.exec_params1(
      "SELECT COALESCE(sum(decoded_bytes), 0)::bigint, COALESCE(sum(octet_length(data)), 0)::bigint "
      "FROM upload_parts WHERE project_id = $1 AND upload_id = $2 AND part <> $3",
      project_id, upload, part);
  facts.decoded_bytes = others[0].as<std::int64_t>() + body.decoded_bytes;
  facts.stored_bytes = others[1].as<std::int64_t>() + static_cast<std::int64_t>(body.data.size());
  facts.of_token = totals(tx.exec_params1(kOpenOfToken, token_id, project_id, upload));
  facts.of_project = totals(tx.exec_params1(kOpenOfProject, project_id, upload));
  check(facts);
  tx.exec_params0(
      "INSERT INTO upload_parts (project_id, upload_id, part, data, gzip, decoded_bytes, sha256) "
      "VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (project_id, upload_id, part) DO UPDATE SET "
      "data = EXCLUDED.data, gzip = EXCLUDED.gzip, decoded_bytes = EXCLUDED.decoded_bytes, "
      "sha256 = EXCLUDED.sha256",
      project_id, upload, part, pqxx::binarystring(body.data.data(), body.data.size()), body.gzip,
      body.decoded_bytes, body.sha256);
  tx.exec_params0(
      "UPDATE uploads SET stored_bytes = $3, decoded_bytes = $4 WHERE project_id = $1 AND id = $2",
      project_id, upload, facts.stored_bytes, facts.decoded_bytes);
  return *state(tx, project_id, token_id, upload);
}

std::optional<std::vector<StoredPartBody>> UploadRepository::claim(pqxx::work& tx, std::int64_t project_id,
                                                                   std::int64_t token_id,
                                                                   const std::string& upload,
                                                                   std::optional<UploadState>& state) {
  state = UploadRepository::state(tx, project_id, token_id, upload);
  if (!state || state->run_id || static_cast<int>(state->received.size()) != state->parts)
    return std::nullopt;
  if (tx.exec_params(kUploadClaim, project_id, upload, token_id, kCompletionClaimSeconds).empty())
    throw Conflict("upload_completing", "upload " + upload + " is being completed by another request; retry");
  std::vector<StoredPartBody> bodies;
  for (const auto& row : tx.exec_params(
           "SELECT data, gzip FROM upload_parts WHERE project_id = $1 AND upload_id = $2 ORDER BY part",
           project_id, upload)) {
    const pqxx::binarystring data(row[0]);
    bodies.push_back({data.str(), row[1].as<bool>()});
  }
  return bodies;
}

void UploadRepository::release(pqxx::work& tx, std::int64_t project_id, const std::string& upload) {
  tx.exec_params0("UPDATE uploads SET completing_since = NULL WHERE project_id = $1 AND id = $2", project_id,
                  upload);
}

void UploadRepository::completed(pqxx::work& tx, std::int64_t project_id, const std::string& upload,
                                 std::int64_t run_id) {
  tx.exec_params0(
      "UPDATE uploads SET run_id = $3, touched_at = now(), completing_since = NULL, stored_bytes = 0, "
      "decoded_bytes = 0 WHERE project_id = $1 AND id = $2",
      project_id, upload, run_id);
  tx.exec_params0("DELETE FROM upload_parts WHERE project_id = $1 AND upload_id = $2", project_id, upload);
}

void UploadRepository::taken_as_shard(pqxx::work& tx, std::int64_t project_id, const std::string& upload,
                                      std::int64_t job_id) {
  tx.exec_params0(
      "UPDATE uploads SET shard_job_id = $3, touched_at = now(), completing_since = NULL "
      "WHERE project_id = $1 AND id = $2",
      project_id, upload, job_id);
}

std::int64_t UploadRepository::expire(pqxx::work& tx, int incomplete_minutes) {
  return static_cast<std::int64_t>(
      tx.exec_params("DELETE FROM uploads WHERE touched_at < now() - make_interval(mins => $1) AND "
                     "(run_id IS NULL OR touched_at < now() - interval '1 day')",
                     incomplete_minutes)
          .affected_rows());
}

OpenUploads UploadRepository::open_uploads(pqxx::work& tx) {
  const pqxx::row row = tx.exec1(
      "SELECT count(*), COALESCE(sum(stored_bytes), 0)::bigint, COALESCE(sum(decoded_bytes), 0)::bigint "
      "FROM uploads WHERE run_id IS NULL AND shard_job_id IS NULL");
  return {row[0].as<std::int64_t>(), row[1].as<std::int64_t>(), row[2].as<std::int64_t>()};
}

}  // namespace kw::server
