// What UploadService reads and writes: the parts of reports sent in parts,
// one transaction at a time. kw-server keeps them in PostgreSQL
// (PgUploadStore, over UploadRepository); the rules of uploads are tested on
// an in-memory stand-in (server/tests/in_memory_store.hpp), and both pass one
// contract (server/tests/upload_store_contract.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/uploads.hpp"

namespace kw::server {

// One transaction, as JobTransaction's: kept when the work returns, and
// nothing of it when the work throws.
class UploadTransaction {
 public:
  virtual ~UploadTransaction() = default;

  // The project's id; NotFound ("no_such_project") when there is none.
  virtual std::int64_t existing_project_id(const std::string& name) = 0;
  // As UploadRepository's functions of the same names.
  virtual UploadState put_part(std::int64_t project_id, std::int64_t token_id, const std::string& upload,
                               int part, int parts, const PartBody& body, const PartCheck& check) = 0;
  virtual std::optional<UploadState> state(std::int64_t project_id, std::int64_t token_id,
                                           const std::string& upload) = 0;
  virtual std::optional<std::vector<StoredPartBody>> claim(std::int64_t project_id, std::int64_t token_id,
                                                           const std::string& upload,
                                                           std::optional<UploadState>& state) = 0;
  virtual void release(std::int64_t project_id, const std::string& upload) = 0;
  virtual void completed(std::int64_t project_id, const std::string& upload, std::int64_t run_id) = 0;
  virtual void taken_as_shard(std::int64_t project_id, const std::string& upload, std::int64_t job_id) = 0;
  // A completed upload's run's verdict.
  virtual std::string verdict_of(std::int64_t run_id) = 0;
};

class UploadStore {
 public:
  using Transaction = UploadTransaction;
  virtual ~UploadStore() = default;
  virtual void transact(const std::function<void(UploadTransaction&)>& work) = 0;
};

}  // namespace kw::server
