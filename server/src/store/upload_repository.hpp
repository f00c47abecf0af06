// Run reports sent in parts (schema 028): each part kept as it arrives, on
// whichever server takes it, until the client completes the upload; the
// report is then ingested whole. A client names its upload, so a resend of
// the same report finds the parts already sent.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <pqxx/pqxx>

namespace kw::server {

struct UploadState {
  int parts = 0;
  std::vector<int> received;           // ascending
  std::int64_t bytes = 0;              // of the parts received, decoded
  std::optional<std::int64_t> run_id;  // once completed
};

class UploadRepository {
 public:
  // Stores part `part` (from 0) of `parts`, replacing an earlier copy of it;
  // the first part to arrive creates the upload. Throws Conflict when the
  // upload was begun with another number of parts or is already completed,
  // and 413 when its parts together would pass `limit` bytes.
  static UploadState put_part(pqxx::work& tx, std::int64_t project_id, const std::string& upload, int part,
                              int parts, const std::string& body, std::size_t limit);
  static std::optional<UploadState> state(pqxx::work& tx, std::int64_t project_id, const std::string& upload);
  // Every part's body in order; the caller has checked that all arrived.
  static std::vector<std::string> bodies(pqxx::work& tx, std::int64_t project_id, const std::string& upload);
  // The upload made run `run_id`: its parts are dropped, its answer kept.
  static void completed(pqxx::work& tx, std::int64_t project_id, const std::string& upload,
                        std::int64_t run_id);
  // Removes uploads untouched for `hours`, completed or not; answers how many.
  static std::int64_t expire(pqxx::work& tx, int hours);
};

}  // namespace kw::server
