// Which project a resource belongs to, and whether the caller may touch it:
// the one place a request's resource is checked against its token. Each
// throws NotFound ("no_such_<resource>") when there is none and Forbidden
// ("project_denied") when the caller's token does not name its project.
// `caller` null: a read where reads are open.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "access.hpp"
#include "service/bisect_store.hpp"
#include "service/job_store.hpp"
#include "service/profile_store.hpp"
#include "service/run_store.hpp"

namespace kw::server {

// The project's id.
std::int64_t owned_project(RunTransaction& tx, const Caller* caller, const std::string& name);
// The run's project.
std::string owned_run(RunTransaction& tx, const Caller* caller, std::int64_t run_id);
std::string owned_run(ProfileTransaction& tx, const Caller* caller, std::int64_t run_id);
std::string owned_bisect(BisectTransaction& tx, const Caller* caller, std::int64_t bisect_id);
// The job as GET /api/v1/jobs/{id} shows it.
nlohmann::json owned_job(JobTransaction& tx, const Caller* caller, std::int64_t job_id);
// The profile as GET /api/v1/profiles/{id} shows it.
nlohmann::json owned_profile(ProfileTransaction& tx, const Caller* caller, std::int64_t profile_id);

}  // namespace kw::server
