#include "store/upload_repository.hpp"

#include "errors.hpp"

namespace kw::server {

namespace {

// The upload row locked, so parts arriving at once on several servers count
// each other's bytes.
constexpr const char* kLockUpload = R"sql(
INSERT INTO uploads (project_id, id, parts) VALUES ($1, $2, $3)
ON CONFLICT (project_id, id) DO UPDATE SET touched_at = now()
RETURNING parts, run_id
)sql";

}  // namespace

std::optional<UploadState> UploadRepository::state(pqxx::work& tx, std::int64_t project_id,
                                                   const std::string& upload) {
  pqxx::result head = tx.exec_params("SELECT parts, run_id FROM uploads WHERE project_id = $1 AND id = $2",
                                     project_id, upload);
  if (head.empty()) return std::nullopt;
  UploadState state;
  state.parts = head[0][0].as<int>();
  if (!head[0][1].is_null()) state.run_id = head[0][1].as<std::int64_t>();
  for (const auto& row : tx.exec_params(
           "SELECT part, octet_length(body) FROM upload_parts WHERE project_id = $1 AND upload_id = $2 "
           "ORDER BY part",
           project_id, upload)) {
    state.received.push_back(row[0].as<int>());
    state.bytes += row[1].as<std::int64_t>();
  }
  return state;
}

UploadState UploadRepository::put_part(pqxx::work& tx, std::int64_t project_id, const std::string& upload,
                                       int part, int parts, const std::string& body, std::size_t limit) {
  pqxx::row locked = tx.exec_params1(kLockUpload, project_id, upload, parts);
  const int begun_with = locked[0].as<int>();
  if (begun_with != parts) {
    throw Conflict("upload_mismatch", "upload " + upload + " was begun with " + std::to_string(begun_with) +
                                          " parts, not " + std::to_string(parts));
  }
  if (!locked[1].is_null()) {
    throw Conflict("upload_completed",
                   "upload " + upload + " is already stored as run " + locked[1].as<std::string>());
  }
  const std::int64_t others = tx.exec_params1(
                                    "SELECT COALESCE(sum(octet_length(body)), 0)::bigint FROM upload_parts "
                                    "WHERE project_id = $1 AND upload_id = $2 AND part <> $3",
                                    project_id, upload, part)[0]
                                  .as<std::int64_t>();
  if (static_cast<std::size_t>(others) + body.size() > limit) {
    throw PayloadTooLarge("payload_too_large", "upload " + upload + ": its parts come to " +
                                                   std::to_string(others + body.size()) +
                                                   " bytes decoded, more than the limit of " +
                                                   std::to_string(limit) + " for one report");
  }
  tx.exec_params0(
      "INSERT INTO upload_parts (project_id, upload_id, part, body) VALUES ($1, $2, $3, $4) "
      "ON CONFLICT (project_id, upload_id, part) DO UPDATE SET body = EXCLUDED.body",
      project_id, upload, part, body);
  return *state(tx, project_id, upload);
}

std::vector<std::string> UploadRepository::bodies(pqxx::work& tx, std::int64_t project_id,
                                                  const std::string& upload) {
  std::vector<std::string> bodies;
  for (const auto& row :
       tx.exec_params("SELECT body FROM upload_parts WHERE project_id = $1 AND upload_id = $2 ORDER BY part",
                      project_id, upload))
    bodies.push_back(row[0].as<std::string>());
  return bodies;
}

void UploadRepository::completed(pqxx::work& tx, std::int64_t project_id, const std::string& upload,
                                 std::int64_t run_id) {
  tx.exec_params0("UPDATE uploads SET run_id = $3, touched_at = now() WHERE project_id = $1 AND id = $2",
                  project_id, upload, run_id);
  tx.exec_params0("DELETE FROM upload_parts WHERE project_id = $1 AND upload_id = $2", project_id, upload);
}

std::int64_t UploadRepository::expire(pqxx::work& tx, int hours) {
  return static_cast<std::int64_t>(
      tx.exec_params("DELETE FROM uploads WHERE touched_at < now() - make_interval(hours => $1)", hours)
          .affected_rows());
}

}  // namespace kw::server
