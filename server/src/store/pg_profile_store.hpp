// PgProfileStore: the profile store in PostgreSQL (service/profile_store.hpp says what it holds).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "model/notifications.hpp"
#include "service/profile_store.hpp"
#include "store/database.hpp"
#include "store/pg_job_store.hpp"
#include "store/profile_repository.hpp"

namespace kw::server {

class PgProfileStore final : public ProfileStore {
 public:
  PgProfileStore(ConnectionPool& pool, const NotifierOptions& notifications)
      : pool_(pool), notifications_(notifications) {}
  // Retried whole on a serialization failure or a lost connection (with_transaction).
  void transact(const std::function<void(ProfileTransaction&)>& work) override;

 private:
  ConnectionPool& pool_;
  const NotifierOptions& notifications_;
};

}  // namespace kw::server
