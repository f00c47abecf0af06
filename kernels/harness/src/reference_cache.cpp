#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "kw/common/hash.hpp"
#include "kwbench/kwbench.hpp"

namespace kwbench {

namespace fs = std::filesystem;

namespace {

// The file of a key: a hash names it, and the key itself heads it, so two
// keys with one hash never serve each other's values.
std::string file_name(const std::string& key) {
  char name[32];
  std::snprintf(name, sizeof(name), "%016llx.ref", static_cast<unsigned long long>(kw::common::fnv1a64(key)));
  return name;
}

fs::path default_dir() {
  if (const char* dir = std::getenv("KWBENCH_REFERENCE_CACHE")) return std::string(dir) == "off" ? "" : dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "kwbench";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "kwbench";
  return "";
}

}  // namespace

ReferenceCache& ReferenceCache::instance() {
  static ReferenceCache cache(default_dir());
  return cache;
}

ReferenceCache::ReferenceCache(fs::path dir, std::uintmax_t max_bytes)
    : dir_(std::move(dir)), max_bytes_(max_bytes) {}

std::optional<std::vector<float>> ReferenceCache::load(const std::string& key) const {
  if (dir_.empty()) return std::nullopt;
  std::ifstream in(dir_ / file_name(key), std::ios::binary);
  std::string stored_key;
  std::size_t count = 0;
  if (!in || !std::getline(in, stored_key) || stored_key != key || !(in >> count) || in.get() != '\n')
    return std::nullopt;
  std::vector<float> values(count);
  if (!in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(count * sizeof(float))))
    return std::nullopt;
  return values;
}

void ReferenceCache::store(const std::string& key, const std::vector<float>& values) const {
  if (dir_.empty()) return;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  const fs::path target = dir_ / file_name(key);
  // Written aside, then renamed: a reader never sees half an entry.
  const fs::path partial = target.string() + "." + std::to_string(getpid());
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    out << key << '\n' << values.size() << '\n';
    out.write(reinterpret_cast<const char*>(values.data()),
              static_cast<std::streamsize>(values.size() * sizeof(float)));
    if (!out) {
      fs::remove(partial, ec);
      return;
    }
  }
  fs::rename(partial, target, ec);
  if (ec) fs::remove(partial, ec);

  std::vector<std::pair<fs::file_time_type, fs::path>> entries;
  std::uintmax_t total = 0;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    if (entry.path().extension() != ".ref") continue;
    total += entry.file_size(ec);
    entries.emplace_back(entry.last_write_time(ec), entry.path());
  }
  std::sort(entries.begin(), entries.end());
  for (const auto& [when, path] : entries) {
    if (total <= max_bytes_) break;
    if (path == target) continue;
    std::uintmax_t size = fs::file_size(path, ec);
    if (fs::remove(path, ec)) total -= size;
  }
}

}  // namespace kwbench
