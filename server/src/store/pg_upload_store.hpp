// PgUploadStore: the upload store in PostgreSQL (service/upload_store.hpp says what it holds).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "service/upload_store.hpp"
#include "store/database.hpp"
#include "store/upload_repository.hpp"

namespace kw::server {

class PgUploadStore final : public UploadStore {
 public:
  explicit PgUploadStore(ConnectionPool& pool) : pool_(pool) {}
  // Retried whole on a serialization failure or a lost connection (with_transaction).
  void transact(const std::function<void(UploadTransaction&)>& work) override;

 private:
  ConnectionPool& pool_;
};

}  // namespace kw::server
