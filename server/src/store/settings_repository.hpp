// A project's settings in PostgreSQL (the projects and case_settings
// tables): read whole, and written as a change the settings service checked.
#pragma once

#include <cstdint>

#include <pqxx/pqxx>

#include "model/settings.hpp"

namespace kw::server {

class SettingsRepository {
 public:
  static ProjectSettings get(pqxx::work& tx, std::int64_t project_id);
  // Writes the change; returns the settings it leaves.
  static ProjectSettings update(pqxx::work& tx, std::int64_t project_id, const SettingsChange& change);
};

}  // namespace kw::server
