// A run report sent in parts (docs/api.md, "Reports in parts"). The parts
// are kept in the store (UploadStore), so they may reach different servers;
// completing the upload ingests the whole report in one transaction, as POST
// /api/v1/runs would.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "access.hpp"
#include "service/ingest_service.hpp"
#include "service/upload_store.hpp"

namespace kw::server {

struct UploadLimits {
  std::size_t report_bytes = std::size_t{64} * 1024 * 1024;  // what the parts together decompress to
  UploadQuota quota;
};

// A completion's outcome: the stored run (or a shard's receipt), and the job it answered.
struct CompletedUpload {
  IngestResult stored;
  std::optional<std::int64_t> job_id;
};

// The rules a part is held to, by the facts its store read under the
// upload's lock: NotFound for another token's upload, Conflict for another
// number of parts or an upload completed or being completed, 413 past
// `report_bytes` decoded, 429 for a new upload past a quota's count, 507 past
// a quota's bytes.
void check_part(const PartFacts& facts, std::int64_t token_id, const std::string& upload, int parts,
                std::size_t report_bytes, const UploadQuota& quota);

class UploadService {
 public:
  UploadService(UploadStore& store, IngestService& ingest, UploadLimits limits)
      : store_(store), ingest_(ingest), limits_(limits) {}

  const UploadLimits& limits() const { return limits_; }
  UploadState put_part(const Caller& caller, const std::string& project, const std::string& upload, int part,
                       int parts, const PartBody& body);
  // NotFound ("no_such_upload"): none begun, or expired.
  UploadState state(const Caller& caller, const std::string& project, const std::string& upload);
  // Ingests the report `assemble` makes of the stored parts and marks the
  // upload with its run. Claimed in a transaction of its own: a second
  // completion, or a part sent meanwhile, is refused until this one has
  // stored its run or failed (then the claim is released). NotFound: no such
  // upload; Conflict ("upload_incomplete"): parts missing. A completed
  // upload is answered with its run, marked duplicate.
  CompletedUpload complete(const Caller& caller, const std::string& project, const std::string& upload,
                           const std::function<nlohmann::json(const std::vector<StoredPartBody>&)>& assemble);

 private:
  static std::int64_t project_id(UploadTransaction& tx, const Caller& caller, const std::string& project);

  UploadStore& store_;
  IngestService& ingest_;
  UploadLimits limits_;
};

}  // namespace kw::server
