#include "service/ownership.hpp"

#include "errors.hpp"

namespace kw::server {

namespace {

// `project`: the resource's, nullopt where there is no such resource.
std::string owner(const std::optional<std::string>& project, const Caller* caller,
                  const std::string& resource, std::int64_t id) {
  if (!project) throw NotFound("no_such_" + resource, "no " + resource + " " + std::to_string(id));
  require_access(caller, *project);
  return *project;
}

}  // namespace

std::int64_t owned_project(RunTransaction& tx, const Caller* caller, const std::string& name) {
  // The token is asked first: a project it does not name is not even said to exist.
  require_access(caller, name);
  std::optional<std::int64_t> id = tx.find_project(name);
  if (!id) throw NotFound("no_such_project", "no project \"" + name + "\"");
  return *id;
}

std::string owned_run(RunTransaction& tx, const Caller* caller, std::int64_t run_id) {
  return owner(tx.project_of_run(run_id), caller, "run", run_id);
}

std::string owned_run(ProfileTransaction& tx, const Caller* caller, std::int64_t run_id) {
  return owner(tx.project_of_run(run_id), caller, "run", run_id);
}

std::string owned_bisect(BisectTransaction& tx, const Caller* caller, std::int64_t bisect_id) {
  return owner(tx.project_of(bisect_id), caller, "bisect", bisect_id);
}

nlohmann::json owned_job(JobTransaction& tx, const Caller* caller, std::int64_t job_id) {
  auto job = tx.get(job_id);
  if (!job) throw NotFound("no_such_job", "no job " + std::to_string(job_id));
  require_access(caller, job->value("project", ""));
  return *job;
}

nlohmann::json owned_profile(ProfileTransaction& tx, const Caller* caller, std::int64_t profile_id) {
  auto profile = tx.get(profile_id);
  if (!profile) throw NotFound("no_such_profile", "no profile " + std::to_string(profile_id));
  require_access(caller, (*profile)["project"].get<std::string>());
  return *profile;
}

}  // namespace kw::server
