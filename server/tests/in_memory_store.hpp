// A stand-in for PostgreSQL behind kw-server's services, for tests of their
// rules: the queue (JobStore, in_memory_queue.hpp) and its bisects
// (BisectStore, in_memory_bisects.hpp), the runs (RunStore,
// in_memory_runs.hpp), reports sent in parts (UploadStore,
// in_memory_uploads.hpp), and the projects, settings and tokens
// (ProjectStore), all in one state (in_memory_state.hpp), so that a report
// ingested completes the job it answers and is judged by the settings an
// admin set.
//
// Each transaction works on a copy of the state, which replaces the state
// when the work returns and no other transaction committed meanwhile;
// otherwise the work runs again on what the other left, as kw-server retries
// a transaction PostgreSQL refused to serialize. So transactions see only
// what was committed before them (ingest judges a report on a second
// transaction while the first stores it), and one that throws leaves
// nothing behind.
//
// Only for tests: the stores' SQL is tested on PostgreSQL, and the stand-in
// is held to it by job_store_contract.hpp, run_store_contract.hpp,
// bisect_store_contract.hpp and upload_store_contract.hpp, which both pass.
#pragma once

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "in_memory_queue.hpp"
#include "in_memory_runs.hpp"
#include "in_memory_state.hpp"
#include "in_memory_uploads.hpp"
#include "service/job_store.hpp"
#include "service/project_store.hpp"
#include "service/run_store.hpp"
#include "store/notification_outbox.hpp"

namespace kw::server::testing {

class InMemoryStore final : public JobStore,
                            public RunStore,
                            public UploadStore,
                            public ProjectStore,
                            public BisectStore {
  // Defined before their callers: their return types are deduced.
  template <typename Read>
  auto read(Read&& what) {
    std::lock_guard lock(mutex_);
    return what(state_);
  }

  template <typename Work>
  void in_snapshot(Work&& work) {
    for (;;) {
      MemoryState copy;
      std::uint64_t seen = 0;
      {
        std::lock_guard lock(mutex_);
        copy = state_;
        seen = version_;
      }
      work(copy);
      std::lock_guard lock(mutex_);
      if (version_ != seen) continue;  // another committed: run again on what it left
      state_ = std::move(copy);
      ++version_;
      return;
    }
  }

 public:
  // The project, with `settings`; its id.
  std::int64_t add_project(const std::string& name, ProjectSettings settings = {}) {
    std::int64_t id = 0;
    in_snapshot([&](MemoryState& s) {
      settings.id = static_cast<std::int64_t>(s.projects.size()) + 1;
      settings.name = name;
      s.projects.push_back(settings);
      id = settings.id;
    });
    return id;
  }

  // Moves the store's clock: leases that end within `seconds` expire.
  void advance(double seconds) {
    in_snapshot([&](MemoryState& s) { s.now += seconds; });
  }

  std::vector<Notice> notices() {
    return read([](const MemoryState& s) { return s.notices; });
  }
  std::size_t runs_stored() {
    return read([](const MemoryState& s) { return s.runs.size(); });
  }
  // The projects whose writes the reads were told of, in order.
  std::vector<std::string> committed_projects() {
    return read([](const MemoryState& s) { return s.committed; });
  }

  void transact(const std::function<void(JobTransaction&)>& work) override {
    in_snapshot([&](MemoryState& s) {
      InMemoryQueue queue(s);
      work(queue);
    });
  }

  void transact(const std::function<void(RunTransaction&)>& work) override {
    in_snapshot([&](MemoryState& s) {
      InMemoryRuns runs(s);
      work(runs);
    });
  }

  void transact(const std::function<void(BisectTransaction&)>& work) override {
    in_snapshot([&](MemoryState& s) {
      InMemoryQueue queue(s);
      work(queue.bisects());
    });
  }

  void transact(const std::function<void(UploadTransaction&)>& work) override {
    in_snapshot([&](MemoryState& s) {
      InMemoryUploads uploads(s);
      work(uploads);
    });
  }

  void committed(const std::string& project) override {
    in_snapshot([&](MemoryState& s) { s.committed.push_back(project); });
  }

  std::optional<ProjectSettings> create_project(const std::string& name,
                                                const std::string& default_branch) override {
    std::optional<ProjectSettings> made;
    in_snapshot([&](MemoryState& s) {
      made.reset();
      if (!s.find_project(name)) made = make_project(s, name, default_branch);
    });
    return made;
  }

  std::optional<ProjectSettings> settings(const std::string& name) override {
    return read([&](const MemoryState& s) -> std::optional<ProjectSettings> {
      const ProjectSettings* found = s.find_project(name);
      return found ? std::optional<ProjectSettings>(*found) : std::nullopt;
    });
  }

  std::optional<ProjectSettings> update_settings(const std::string& name,
                                                 const SettingsChange& change) override {
    std::optional<ProjectSettings> changed;
    in_snapshot([&](MemoryState& s) {
      changed.reset();
      if (!s.find_project(name)) return;
      ProjectSettings& project = s.project(s.find_project(name)->id);
      project.apply(change);
      s.committed.push_back(name);
      changed = project;
    });
    return changed;
  }

  // A webhook's target, never failed: deliveries are not kept here.
  nlohmann::json notification_targets(const ProjectSettings& project) override {
    nlohmann::json targets = nlohmann::json::array();
    if (!project.webhook_url.empty())
      targets.push_back({{"target", NotificationOutbox::target_of("webhook", project.webhook_url)},
                         {"state", "ok"},
                         {"consecutive_failures", 0},
                         {"pending", 0}});
    return targets;
  }

  std::pair<std::string, TokenInfo> create_token(
      const std::string& name, Scope scope,
      const std::optional<std::vector<std::string>>& projects) override {
    std::pair<std::string, TokenInfo> made;
    in_snapshot([&](MemoryState& s) {
      if (projects) {
        for (const std::string& project : *projects)
          if (!s.find_project(project)) make_project(s, project, "main");
      }
      TokenInfo info;
      info.id = static_cast<std::int64_t>(s.tokens.size()) + 1;
      info.name = name;
      info.scope = scope;
      info.created_at = "2026-11-28 00:00:00+00";
      info.projects = projects;
      made = {"kw_in_memory_" + std::to_string(info.id), info};
      s.tokens.push_back({info, made.first});
    });
    return made;
  }

  std::vector<TokenInfo> tokens() override {
    return read([](const MemoryState& s) {
      std::vector<TokenInfo> listed;
      for (const MemoryToken& token : s.tokens) listed.push_back(token.info);
      return listed;
    });
  }

  bool revoke_token(std::int64_t token_id) override {
    bool revoked = false;
    in_snapshot([&](MemoryState& s) {
      revoked = false;
      if (token_id < 1 || token_id > static_cast<std::int64_t>(s.tokens.size())) return;
      TokenInfo& info = s.tokens[static_cast<std::size_t>(token_id - 1)].info;
      if (!info.revoked_at.empty()) return;
      info.revoked_at = "2026-11-28 00:00:01+00";
      revoked = true;
    });
    return revoked;
  }

  // Who a token's secret is, as kw-server's token lookup answers (nullopt:
  // none, or revoked).
  std::optional<Caller> authenticate(const std::string& secret) {
    return read([&](const MemoryState& s) -> std::optional<Caller> {
      for (const MemoryToken& token : s.tokens) {
        if (token.secret == secret && token.info.revoked_at.empty())
          return Caller{token.info.id, token.info.name, token.info.scope, token.info.projects};
      }
      return std::nullopt;
    });
  }

 private:
  static ProjectSettings make_project(MemoryState& s, const std::string& name,
                                      const std::string& default_branch) {
    ProjectSettings project;
    project.id = static_cast<std::int64_t>(s.projects.size()) + 1;
    project.name = name;
    project.default_branch = default_branch;
    s.projects.push_back(project);
    return project;
  }

  std::mutex mutex_;
  MemoryState state_;
  std::uint64_t version_ = 0;
};

}  // namespace kw::server::testing
