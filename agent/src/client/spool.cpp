#include "client/spool.hpp"

#include <fstream>

#include "client/report_upload.hpp"

namespace kw::agent {

namespace fs = std::filesystem;
using nlohmann::json;

Spool::Spool(fs::path dir) : dir_(std::move(dir)) {
  fs::create_directories(dir_ / "rejected");
}

fs::path Spool::add(const std::string& name, const std::string& target, const json& report) {
  fs::path file = dir_ / (name + ".json");
  fs::path temp = dir_ / (name + ".json.tmp");
  {
    std::ofstream out(temp, std::ios::trunc);
    out << json{{"target", target}, {"report", report}}.dump();
    out.flush();
    if (!out) throw std::runtime_error("cannot write " + temp.string());
  }
  fs::rename(temp, file);  // a crash leaves either the old state or the whole file
  return file;
}

std::size_t Spool::pending() const {
  std::size_t count = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) count += entry.path().extension() == ".json";
  return count;
}

namespace {

// A report's answer names its run and verdict; a shard's, what its job
// still waits for; a profile's, its state.
std::string what_was_delivered(const json& answer) {
  if (answer.contains("verdict"))
    return "run " + answer["run_id"].dump() + ", verdict " + answer.value("verdict", std::string("?"));
  if (answer.contains("shard")) {
    const json& shard = answer["shard"];
    return "shard " + shard.value("index", json()).dump() + "/" + shard.value("count", json()).dump() +
           " of job " + shard.value("job_id", json()).dump() + " taken; " +
           (shard.value("state", std::string()) == "failed"
                ? "the job failed: " + shard.value("error", std::string())
                : "waiting for shard(s) " + shard.value("waiting_for", json::array()).dump());
  }
  return "profile " + answer.value("state", std::string("stored"));
}

}  // namespace

std::size_t Spool::deliver(http::Client& client, const std::function<void(const std::string&)>& log) {
  auto now = std::chrono::steady_clock::now();
  for (const auto& entry : fs::directory_iterator(dir_)) {
    if (entry.path().extension() != ".json") continue;
    std::string key = entry.path().filename().string();
    Backoff& backoff = backoff_[key];
    if (now < backoff.next) continue;
    json spooled;
    try {
      std::ifstream in(entry.path());
      spooled = json::parse(in);
    } catch (const std::exception& error) {
      log("spool: " + key + " is unreadable (" + error.what() + "); moved to rejected/");
      fs::rename(entry.path(), dir_ / "rejected" / key);
      continue;
    }
    try {
      http::Response response =
          send_report(client, spooled.at("target").get<std::string>(), spooled.at("report"),
                      [&](const std::string& line) { log(key + ": " + line); });
      if (response.status / 100 == 2) {
        const json answer = response.json();
        log("delivered " + key + ": " + what_was_delivered(answer) +
            (answer.value("duplicate", false) ? " (already stored)" : ""));
        fs::remove(entry.path());
        backoff_.erase(key);
        continue;
      }
      // A completion under way (or one that died, whose claim the server
      // lets go within seconds) is no refusal: the report goes again later.
      const bool completing =
          response.status == 409 && response.body.find("\"upload_completing\"") != std::string::npos;
      if (response.status >= 400 && response.status < 500 && response.status != 408 &&
          response.status != 429 && !completing) {
        log("server refused " + key + " (HTTP " + std::to_string(response.status) + "): " + response.body +
            "; moved to rejected/");
        std::ofstream(dir_ / "rejected" / (key + ".reason"))
            << response.status << " " << response.body << "\n";
        fs::rename(entry.path(), dir_ / "rejected" / key);
        backoff_.erase(key);
        continue;
      }
      log("server answered HTTP " + std::to_string(response.status) + " for " + key + "; will retry");
      backoff.unreachable = false;
    } catch (const http::ConnectionError& error) {
      log(std::string("server unreachable (") + error.what() + "); " + key + " stays spooled");
      backoff.unreachable = true;
    }
    ++backoff.attempts;
    backoff.next = now + std::chrono::seconds(std::min(300, 1 << std::min(backoff.attempts, 9)));
  }
  return pending();
}

}  // namespace kw::agent
