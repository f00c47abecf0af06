#include "service/ownership.hpp"

#include "errors.hpp"
#include "store/bisect_repository.hpp"
#include "store/profile_repository.hpp"
#include "store/run_repository.hpp"

namespace kw::server {

std::int64_t owned_project(pqxx::work& tx, const Caller* caller, const std::string& name) {
  // The token is asked first: a project it does not name is not even said to exist.
  require_access(caller, name);
  auto id = RunRepository::find_project(tx, name);
  if (!id) throw NotFound("no_such_project", "no project \"" + name + "\"");
  return *id;
}

std::string owned_run(pqxx::work& tx, const Caller* caller, std::int64_t run_id) {
  auto project = RunRepository::project_of_run(tx, run_id);
  if (!project) throw NotFound("no_such_run", "no run " + std::to_string(run_id));
  require_access(caller, *project);
  return *project;
}

std::string owned_bisect(pqxx::work& tx, const Caller* caller, std::int64_t bisect_id) {
  auto project = BisectRepository::project_of(tx, bisect_id);
  if (!project) throw NotFound("no_such_bisect", "no bisect " + std::to_string(bisect_id));
  require_access(caller, *project);
  return *project;
}

nlohmann::json owned_job(JobTransaction& tx, const Caller* caller, std::int64_t job_id) {
  auto job = tx.get(job_id);
  if (!job) throw NotFound("no_such_job", "no job " + std::to_string(job_id));
  require_access(caller, job->value("project", ""));
  return *job;
}

nlohmann::json owned_profile(pqxx::work& tx, const Caller* caller, std::int64_t profile_id) {
  auto profile = ProfileRepository::get(tx, profile_id);
  if (!profile) throw NotFound("no_such_profile", "no profile " + std::to_string(profile_id));
  require_access(caller, (*profile)["project"].get<std::string>());
  return *profile;
}

}  // namespace kw::server
