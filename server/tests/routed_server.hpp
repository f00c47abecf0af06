// kw-server's write side without a database or a socket, for tests of its
// rules through its routes: the run, upload, queue, agent and project routes
// over their services, the services over the in-memory stand-in of the store
// (in_memory_store.hpp), and a client per token as ServerTest gives
// (server_fixture.hpp). What needs PostgreSQL itself (the store's SQL, the
// history reads and their cache, notifications' delivery, the process) is
// tested there.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "http/handlers/handlers.hpp"
#include "http/metrics.hpp"
#include "http/router.hpp"
#include "in_memory_store.hpp"
#include "kw/common/memory_budget.hpp"
#include "routed_request.hpp"
#include "service/ingest_service.hpp"
#include "service/job_service.hpp"
#include "service/run_service.hpp"
#include "service/settings_service.hpp"
#include "service/upload_service.hpp"

namespace kw::server::testing {

class RoutedServerTest : public ::testing::Test {
 protected:
  // `uploads.report_bytes`: also the decoded body limit, as in kw-server.
  explicit RoutedServerTest(QueueSettings queue = {}, UploadLimits uploads = {})
      : ingest_(store_, queue.max_attempts),
        runs_(store_),
        jobs_(store_, queue),
        uploads_(store_, ingest_, uploads) {
    router_.set_body_decoding(uploads.report_bytes, &memory_);
    add_run_routes(router_, ingest_, runs_);
    add_upload_routes(router_, uploads_, ingest_);
    add_job_routes(router_, jobs_);
    add_agent_routes(router_, jobs_);
    add_project_routes(router_, settings_);
    admin_token_ = store_.create_token("admin", Scope::admin, std::nullopt).first;
    agent_token_ = store_.create_token("agent-1", Scope::agent, std::nullopt).first;
    ci_token_ = store_.create_token("ci", Scope::ci, std::nullopt).first;
    read_token_ = store_.create_token("reader", Scope::read, std::nullopt).first;
    store_.create_project("demo", "main");
  }

  RoutedClient client(const std::string& token = {}) { return {router_, token}; }
  RoutedClient agent() { return client(agent_token_); }
  RoutedClient ci() { return client(ci_token_); }

  InMemoryStore store_;
  NotifierOptions notifications_;
  IngestService ingest_;
  RunService runs_;
  JobService jobs_;
  UploadService uploads_;
  SettingsService settings_{store_, notifications_};
  Metrics metrics_;
  common::MemoryBudget memory_{std::size_t{256} << 20};
  Router router_{[this](const std::string& token) { return store_.authenticate(token); }, metrics_, false};
  std::string admin_token_, agent_token_, ci_token_, read_token_;
};

}  // namespace kw::server::testing
