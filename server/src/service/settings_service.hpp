// Projects: made, read, audited and configured.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "access.hpp"
#include "notify/notifier.hpp"
#include "store/database.hpp"
#include "store/read_routing.hpp"

namespace kw::server {

class SettingsService {
 public:
  SettingsService(ConnectionPool& pool, ReadRouting& reads, const NotifierOptions& notifications)
      : pool_(pool), reads_(reads), notifications_(notifications) {}

  // Only an unscoped admin makes projects. Conflict ("project_exists").
  nlohmann::json create_project(const Caller& caller, const std::string& name,
                                const std::string& default_branch);
  // Its settings; for an admin, how delivery to each notification target fares.
  nlohmann::json project(const Caller* caller, const std::string& name);
  std::string audit(const Caller* caller, const std::string& name);
  // A webhook must reach a public address unless the server allows private ones.
  nlohmann::json update(const Caller& caller, const std::string& name, const nlohmann::json& changes);

 private:
  ConnectionPool& pool_;
  ReadRouting& reads_;
  const NotifierOptions& notifications_;
};

}  // namespace kw::server
