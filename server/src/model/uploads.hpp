// Reports sent in parts: an upload's state, its parts and the quotas on
// what is held open.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kw::server {

// How long a completion's claim holds an upload. A completion that died
// (its server or its database killed mid-way) leaves its claim, and a resend
// completes the upload once it lapses; a completion alive past it may meet
// a second one, which the run's identity makes one run (ingest stores a
// report once). A 10,000-case report is judged and stored in under 5 s.
inline constexpr int kCompletionClaimSeconds = 20;

// What the uploads not yet completed may hold. Bytes are as stored (as sent).
struct UploadQuota {
  int uploads_per_token = 8;
  std::int64_t bytes_per_token = std::int64_t{256} << 20;
  int uploads_per_project = 32;
  std::int64_t bytes_per_project = std::int64_t{1} << 30;
  // An upload not completed within this after its last part is removed.
  int incomplete_minutes = 60;
};

struct UploadPart {
  int part = 0;
  std::int64_t decoded_bytes = 0;
  std::string sha256;  // of the decoded part
};

struct UploadState {
  int parts = 0;
  std::vector<UploadPart> received;    // ascending by part
  std::int64_t bytes = 0;              // of the parts received, decoded
  std::int64_t stored_bytes = 0;       // and as stored
  std::optional<std::int64_t> run_id;  // once completed
};

// A part's body as it arrived.
struct PartBody {
  std::string_view data;  // as sent
  bool gzip = false;
  std::int64_t decoded_bytes = 0;
  std::string sha256;  // of the decoded part
};

struct StoredPartBody {
  std::string data;
  bool gzip = false;
};

// Uploads not completed: how many, and the bytes they hold as stored.
struct OpenTotals {
  std::int64_t count = 0, stored_bytes = 0;
};

// What a part is judged by (UploadService's check_part), read under the
// upload's lock, so parts arriving at once on several servers count each
// other's bytes.
struct PartFacts {
  std::optional<std::int64_t> token_id;  // the token that began the upload
  int parts = 0;                         // as it was begun
  std::optional<std::int64_t> run_id;    // once completed
  bool completing = false;               // a completion holds its parts
  bool created = false;                  // this part begins it
  // Of its parts with this one (replacing an earlier copy of it).
  std::int64_t decoded_bytes = 0, stored_bytes = 0;
  OpenTotals of_token, of_project;  // the other uploads not completed
};

using PartCheck = std::function<void(const PartFacts&)>;

// Totals of the uploads not completed, for /metrics.
struct OpenUploads {
  std::int64_t count = 0, stored_bytes = 0, decoded_bytes = 0;
};

}  // namespace kw::server
