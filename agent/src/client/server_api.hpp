// kw-server's API as kw calls it (docs/api.md): every target the agent and
// the CI commands use, in one place, over the HTTP client. A call answers the
// server's Response (status and body); what a status means stays with the
// caller. An agent call to the server is one method here and its use.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "client/report_upload.hpp"
#include "kw/http/client.hpp"

namespace kw::agent {

// The targets, for what keeps a target without a client (the report spool).
namespace api_target {
inline std::string job(std::int64_t id) {
  return "/api/v1/jobs/" + std::to_string(id);
}
inline std::string run(std::int64_t id) {
  return "/api/v1/runs/" + std::to_string(id);
}
inline std::string profile_csv(std::int64_t profile) {
  return "/api/v1/profiles/" + std::to_string(profile) + "/ncu/";
}
// Where a report goes: its job's, or a run of no job.
inline std::string report_of(const nlohmann::json& report) {
  return report.contains("job_id") ? job(report["job_id"].get<std::int64_t>()) + "/report" : "/api/v1/runs";
}
inline std::string profile_result(std::int64_t job_id) {
  return job(job_id) + "/profile";
}
}  // namespace api_target

class ServerApi {
 public:
  explicit ServerApi(http::Client& client) : client_(client) {}

  // The agent's side of a job.
  http::Response claim(const nlohmann::json& body) { return client_.post("/api/v1/agents/claim", body); }
  http::Response health() { return client_.get("/healthz"); }
  http::Response heartbeat(std::int64_t job, const std::string& agent) {
    return client_.post(api_target::job(job) + "/heartbeat", {{"agent", agent}});
  }
  http::Response stage(std::int64_t job, const nlohmann::json& body) {
    return client_.post(api_target::job(job) + "/stages", body);
  }
  http::Response release(std::int64_t job, const std::string& agent) {
    return client_.post(api_target::job(job) + "/release", {{"agent", agent}});
  }
  http::Response fail(std::int64_t job, const std::string& agent, const std::string& reason) {
    return client_.post(api_target::job(job) + "/fail", {{"agent", agent}, {"reason", reason}});
  }
  // In parts when it is large (client/report_upload.hpp).
  http::Response post_report(const nlohmann::json& report,
                             const std::function<void(const std::string&)>& say = {}) {
    return send_report(client_, api_target::report_of(report), report, say);
  }

  // CI's side: a job and the run it made.
  http::Response submit(const nlohmann::json& body) { return client_.post("/api/v1/jobs", body); }
  http::Response job(std::int64_t id) { return client_.get(api_target::job(id)); }
  // One page of a run's cases and comparisons (pages count from 1).
  http::Response run_page(std::int64_t id, int page, int per_page = 2000) {
    return client_.get(api_target::run(id) + "?per_page=" + std::to_string(per_page) +
                       "&page=" + std::to_string(page));
  }
  http::Response explanation(std::int64_t run) { return client_.get(api_target::run(run) + "/explanation"); }
  http::Response profiles(std::int64_t run) { return client_.get(api_target::run(run) + "/profiles"); }
  http::Response acknowledge(std::int64_t run, const std::string& reason) {
    return client_.post(api_target::run(run) + "/acknowledge", {{"reason", reason}});
  }

 private:
  http::Client& client_;
};

}  // namespace kw::agent
