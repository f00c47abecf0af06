// What BisectService reads and writes: a push's bisects, one transaction at
// a time. kw-server keeps them in PostgreSQL (PgBisectStore, over
// BisectRepository, whose SQL the bisect tests run on); a bisect is started
// and moved on by a judged run (RunTransaction::bisect_after_run).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace kw::server {

class BisectTransaction {
 public:
  virtual ~BisectTransaction() = default;
  // As BisectRepository's functions of the same names.
  virtual std::optional<std::string> project_of(std::int64_t bisect_id) = 0;
  virtual std::optional<nlohmann::json> get(std::int64_t bisect_id) = 0;
  virtual std::optional<std::string> cancel(std::int64_t bisect_id) = 0;
};

class BisectStore {
 public:
  using Transaction = BisectTransaction;
  virtual ~BisectStore() = default;
  virtual void transact(const std::function<void(BisectTransaction&)>& work) = 0;
};

}  // namespace kw::server
