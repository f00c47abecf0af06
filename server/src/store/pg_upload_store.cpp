#include "store/pg_upload_store.hpp"

#include "store/run_repository.hpp"

namespace kw::server {

namespace {

class PgUploadTransaction final : public UploadTransaction {
 public:
  explicit PgUploadTransaction(pqxx::work& tx) : tx_(tx) {}

  std::int64_t existing_project_id(const std::string& name) override {
    return RunRepository::existing_project_id(tx_, name);
  }
  UploadState put_part(std::int64_t project_id, std::int64_t token_id, const std::string& upload, int part,
                       int parts, const PartBody& body, const PartCheck& check) override {
    return UploadRepository::put_part(tx_, project_id, token_id, upload, part, parts, body, check);
  }
  std::optional<UploadState> state(std::int64_t project_id, std::int64_t token_id,
                                   const std::string& upload) override {
    return UploadRepository::state(tx_, project_id, token_id, upload);
  }
  std::optional<std::vector<StoredPartBody>> claim(std::int64_t project_id, std::int64_t token_id,
                                                   const std::string& upload,
                                                   std::optional<UploadState>& state) override {
    return UploadRepository::claim(tx_, project_id, token_id, upload, state);
  }
  void release(std::int64_t project_id, const std::string& upload) override {
    UploadRepository::release(tx_, project_id, upload);
  }
  void completed(std::int64_t project_id, const std::string& upload, std::int64_t run_id) override {
    UploadRepository::completed(tx_, project_id, upload, run_id);
  }
  void taken_as_shard(std::int64_t project_id, const std::string& upload, std::int64_t job_id) override {
    UploadRepository::taken_as_shard(tx_, project_id, upload, job_id);
  }
  std::string verdict_of(std::int64_t run_id) override { return RunRepository::verdict_of(tx_, run_id); }

 private:
  pqxx::work& tx_;
};

}  // namespace

void PgUploadStore::transact(const std::function<void(UploadTransaction&)>& work) {
  with_transaction(pool_, [&](pqxx::work& tx) {
    PgUploadTransaction uploads(tx);
    work(uploads);
  });
}

}  // namespace kw::server
