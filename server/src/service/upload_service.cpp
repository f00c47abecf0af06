#include "service/upload_service.hpp"

#include "errors.hpp"

namespace kw::server {

using nlohmann::json;

namespace {

[[noreturn]] void throw_incomplete(const std::string& id, const UploadState& state) {
  std::string missing;
  int shown = 0;
  for (int part = 0, k = 0; part < state.parts && shown < 20; ++part) {
    const auto size = static_cast<int>(state.received.size());
    while (k < size && state.received[static_cast<std::size_t>(k)].part < part) ++k;
    if (k < size && state.received[static_cast<std::size_t>(k)].part == part) continue;
    missing += (missing.empty() ? "" : ", ") + std::to_string(part);
    ++shown;
  }
  throw Conflict("upload_incomplete",
                 "upload " + id + ": " +
                     std::to_string(state.parts - static_cast<int>(state.received.size())) + " of " +
                     std::to_string(state.parts) + " parts have not arrived (" + missing + ")");
}

[[noreturn]] void throw_no_upload(const std::string& id) {
  throw NotFound("no_such_upload", "no upload " + id + " (none begun, or expired)");
}

// Another upload may hold no more than the quota's count and bytes allow.
void check_quota(const OpenTotals& open, bool created, std::int64_t stored_after, int max_uploads,
                 std::int64_t max_bytes, const std::string& whose) {
  if (created && open.count >= max_uploads) {
    throw TooManyRequests("too_many_uploads", whose + " has " + std::to_string(open.count) +
                                                  " uploads not completed, the most it may have open; "
                                                  "complete them, or wait for them to expire");
  }
  if (open.stored_bytes + stored_after > max_bytes) {
    throw InsufficientStorage("upload_quota", whose + "'s uploads not completed would hold " +
                                                  std::to_string(open.stored_bytes + stored_after) +
                                                  " bytes, more than its quota of " +
                                                  std::to_string(max_bytes));
  }
}

}  // namespace

void check_part(const PartFacts& facts, std::int64_t token_id, const std::string& upload, int parts,
                std::size_t report_bytes, const UploadQuota& quota) {
  if (facts.token_id != token_id) throw NotFound("no_such_upload", "no upload " + upload + " of this token");
  if (facts.parts != parts) {
    throw Conflict("upload_mismatch", "upload " + upload + " was begun with " + std::to_string(facts.parts) +
                                          " parts, not " + std::to_string(parts));
  }
  if (facts.run_id)
    throw Conflict("upload_completed",
                   "upload " + upload + " is already stored as run " + std::to_string(*facts.run_id));
  if (facts.completing)
    throw Conflict("upload_completing", "upload " + upload + " is being completed; its parts are fixed");
  if (static_cast<std::size_t>(facts.decoded_bytes) > report_bytes) {
    throw PayloadTooLarge("payload_too_large", "upload " + upload + ": its parts come to " +
                                                   std::to_string(facts.decoded_bytes) +
                                                   " bytes decoded, more than the limit of " +
                                                   std::to_string(report_bytes) + " for one report");
  }
  check_quota(facts.of_token, facts.created, facts.stored_bytes, quota.uploads_per_token,
              quota.bytes_per_token, "this token");
  check_quota(facts.of_project, facts.created, facts.stored_bytes, quota.uploads_per_project,
              quota.bytes_per_project, "this project");
}

// An upload names its project in the path; the caller's token must reach it.
std::int64_t UploadService::project_id(UploadTransaction& tx, const Caller& caller,
                                       const std::string& project) {
  caller.require_project(project);
  return tx.existing_project_id(project);
}

UploadState UploadService::put_part(const Caller& caller, const std::string& project,
                                    const std::string& upload, int part, int parts, const PartBody& body) {
  return in_transaction(store_, [&](UploadTransaction& tx) {
    return tx.put_part(project_id(tx, caller, project), caller.token_id, upload, part, parts, body,
                       [&](const PartFacts& facts) {
                         check_part(facts, caller.token_id, upload, parts, limits_.report_bytes,
                                    limits_.quota);
                       });
  });
}

UploadState UploadService::state(const Caller& caller, const std::string& project,
                                 const std::string& upload) {
  auto state = in_transaction(store_, [&](UploadTransaction& tx) {
    return tx.state(project_id(tx, caller, project), caller.token_id, upload);
  });
  if (!state) throw_no_upload(upload);
  return *state;
}

CompletedUpload UploadService::complete(
    const Caller& caller, const std::string& project, const std::string& upload,
    const std::function<json(const std::vector<StoredPartBody>&)>& assemble) {
  std::int64_t id = 0;
  std::optional<UploadState> state;
  auto bodies = in_transaction(store_, [&](UploadTransaction& tx) {
    id = project_id(tx, caller, project);
    return tx.claim(id, caller.token_id, upload, state);
  });
  if (!state) throw_no_upload(upload);
  if (state->run_id) {
    const std::int64_t run = *state->run_id;
    const std::string verdict =
        in_transaction(store_, [&](UploadTransaction& tx) { return tx.verdict_of(run); });
    return {{run, verdict, true, std::nullopt}, std::nullopt};
  }
  if (!bodies) throw_incomplete(upload, *state);
  try {
    json report = assemble(*bodies);
    std::optional<std::int64_t> job_id;
    if (auto job = report.find("job_id"); job != report.end() && job->is_number_integer())
      job_id = job->get<std::int64_t>();
    IngestResult stored = ingest_.ingest(std::move(report), caller, job_id);
    // A shard's report makes no run of its own: its upload is done (out of
    // the quotas), its parts kept until it expires, and a resend is answered
    // as the shard's was.
    in_transaction(store_, [&](UploadTransaction& tx) {
      if (stored.run_id != 0)
        tx.completed(id, upload, stored.run_id);
      else if (stored.shard)
        tx.taken_as_shard(id, upload, stored.shard->job_id);
    });
    return {std::move(stored), job_id};
  } catch (...) {
    in_transaction(store_, [&](UploadTransaction& tx) { tx.release(id, upload); });
    throw;
  }
}

}  // namespace kw::server
