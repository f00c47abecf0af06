// PgBisectStore: the bisect store in PostgreSQL (service/bisect_store.hpp says what it holds).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "service/bisect_store.hpp"
#include "store/database.hpp"

namespace kw::server {

class PgBisectStore final : public BisectStore {
 public:
  explicit PgBisectStore(ConnectionPool& pool) : pool_(pool) {}
  // Retried whole on a serialization failure or a lost connection (with_transaction).
  void transact(const std::function<void(BisectTransaction&)>& work) override;

 private:
  ConnectionPool& pool_;
};

}  // namespace kw::server
