// Run reports sent in parts (schemas 028, 031): each part kept as it was sent
// (gzip), on whichever server takes it, until the client completes the
// upload; the report is then ingested whole. A client names its upload, so a
// resend of the same report finds the parts already sent. An upload belongs
// to the token that began it, and what tokens and projects hold open is
// limited by quotas.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "model/uploads.hpp"

namespace kw::server {

class UploadRepository {
 public:
  // Stores part `part` (from 0) of `parts` for `token_id`, replacing an
  // earlier copy of it, once `check` (which throws to refuse it) has taken
  // its facts; the first part to arrive creates the upload.
  static UploadState put_part(pqxx::work& tx, std::int64_t project_id, std::int64_t token_id,
                              const std::string& upload, int part, int parts, const PartBody& body,
                              const PartCheck& check);
  // nullopt when there is no such upload of this token.
  static std::optional<UploadState> state(pqxx::work& tx, std::int64_t project_id, std::int64_t token_id,
                                          const std::string& upload);
  // Claims a complete upload for ingest (a completion of it already under
  // way: Conflict) and reads its parts in order. nullopt when it cannot be
  // claimed: not there, completed, or missing parts; `state` says which.
  static std::optional<std::vector<StoredPartBody>> claim(pqxx::work& tx, std::int64_t project_id,
                                                          std::int64_t token_id, const std::string& upload,
                                                          std::optional<UploadState>& state);
  // The claimed upload's ingest failed: it may be completed again.
  static void release(pqxx::work& tx, std::int64_t project_id, const std::string& upload);
  // The upload made run `run_id`: its parts are dropped, its answer kept.
  static void completed(pqxx::work& tx, std::int64_t project_id, const std::string& upload,
                        std::int64_t run_id);
  // The upload was a shard's report, which its job took: it no longer counts
  // as open, and its parts stay (until it expires) to answer a resend.
  static void taken_as_shard(pqxx::work& tx, std::int64_t project_id, const std::string& upload,
                             std::int64_t job_id);
  // Removes uploads not completed and untouched for `incomplete_minutes`,
  // and completed ones after a day; answers how many.
  static std::int64_t expire(pqxx::work& tx, int incomplete_minutes);
  static OpenUploads open_uploads(pqxx::work& tx);
};

}  // namespace kw::server
