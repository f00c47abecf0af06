// The reports sent in parts of the in-memory stand-in for kw-server's
// database (in_memory_store.hpp), as UploadRepository keeps them: an upload
// of a project and name, the token's that began it; each part kept as sent;
// what a part is judged by (PartFacts) counted over the other uploads not
// completed; a completion's claim, which a completion that died gives up
// after kCompletionClaimSeconds of the state's clock. Expiry is tested on PostgreSQL
// only. Both it and PgUploadStore pass upload_store_contract.hpp.
#pragma once

#include <string>
#include <vector>

#include "errors.hpp"
#include "in_memory_state.hpp"
#include "service/upload_store.hpp"

namespace kw::server::testing {

class InMemoryUploads final : public UploadTransaction {
 public:
  explicit InMemoryUploads(MemoryState& state) : s_(state) {}

  std::int64_t existing_project_id(const std::string& name) override { return s_.existing_project_id(name); }

  UploadState put_part(std::int64_t project_id, std::int64_t token_id, const std::string& upload, int part,
                       int parts, const PartBody& body, const PartCheck& check) override {
    PartFacts facts;
    MemoryUpload* found = find(project_id, upload);
    facts.created = !found;
    if (!found) {
      s_.uploads.push_back(
          {project_id, upload, token_id, parts, std::nullopt, std::nullopt, std::nullopt, {}});
      found = &s_.uploads.back();
    }
    found->shard_job_id.reset();
    facts.token_id = found->token_id;
    facts.parts = found->parts;
    facts.run_id = found->run_id;
    facts.completing = found->completing_since.has_value();
    for (const auto& [number, kept] : found->received) {
      if (number == part) continue;
      facts.decoded_bytes += kept.decoded_bytes;
      facts.stored_bytes += static_cast<std::int64_t>(kept.data.size());
    }
    facts.decoded_bytes += body.decoded_bytes;
    facts.stored_bytes += static_cast<std::int64_t>(body.data.size());
    for (const MemoryUpload& other : s_.uploads) {
      if (other.run_id || other.shard_job_id || (other.project_id == project_id && other.id == upload))
        continue;
      if (other.token_id == token_id) add(facts.of_token, other);
      if (other.project_id == project_id) add(facts.of_project, other);
    }
    check(facts);
    found->received[part] = {std::string(body.data), body.gzip, body.decoded_bytes, body.sha256};
    return *state(project_id, token_id, upload);
  }

  std::optional<UploadState> state(std::int64_t project_id, std::int64_t token_id,
                                   const std::string& upload) override {
    const MemoryUpload* found = find(project_id, upload);
    if (!found || found->token_id != token_id) return std::nullopt;
    UploadState state;
    state.parts = found->parts;
    state.run_id = found->run_id;
    for (const auto& [number, kept] : found->received) {
      state.received.push_back({number, kept.decoded_bytes, kept.sha256});
      state.bytes += kept.decoded_bytes;
      state.stored_bytes += static_cast<std::int64_t>(kept.data.size());
    }
    return state;
  }

  std::optional<std::vector<StoredPartBody>> claim(std::int64_t project_id, std::int64_t token_id,
                                                   const std::string& upload,
                                                   std::optional<UploadState>& state) override {
    state = this->state(project_id, token_id, upload);
    if (!state || state->run_id || static_cast<int>(state->received.size()) != state->parts)
      return std::nullopt;
    MemoryUpload& found = *find(project_id, upload);
    if (found.completing_since && *found.completing_since >= s_.now - kCompletionClaimSeconds)
      throw Conflict("upload_completing",
                     "upload " + upload + " is being completed by another request; retry");
    found.completing_since = s_.now;
    std::vector<StoredPartBody> bodies;
    for (const auto& [number, kept] : found.received) bodies.push_back({kept.data, kept.gzip});
    return bodies;
  }

  void release(std::int64_t project_id, const std::string& upload) override {
    if (MemoryUpload* found = find(project_id, upload)) found->completing_since.reset();
  }

  void completed(std::int64_t project_id, const std::string& upload, std::int64_t run_id) override {
    MemoryUpload& found = *find(project_id, upload);
    found.run_id = run_id;
    found.completing_since.reset();
    found.received.clear();
  }

  void taken_as_shard(std::int64_t project_id, const std::string& upload, std::int64_t job_id) override {
    MemoryUpload& found = *find(project_id, upload);
    found.shard_job_id = job_id;
    found.completing_since.reset();
  }

  std::string verdict_of(std::int64_t run_id) override { return s_.run(run_id)->verdict; }

 private:
  static void add(OpenTotals& totals, const MemoryUpload& upload) {
    ++totals.count;
    for (const auto& [number, kept] : upload.received)
      totals.stored_bytes += static_cast<std::int64_t>(kept.data.size());
  }

  MemoryUpload* find(std::int64_t project_id, const std::string& upload) {
    for (MemoryUpload& kept : s_.uploads)
      if (kept.project_id == project_id && kept.id == upload) return &kept;
    return nullptr;
  }

  MemoryState& s_;
};

}  // namespace kw::server::testing
