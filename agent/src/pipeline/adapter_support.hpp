// What the bench adapters share (pipeline/ only): scratch files a child
// writes its result to, the bench's command, and a measurement of samples.
#pragma once

#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kw/common/subprocess.hpp"
#include "pipeline/adapters.hpp"

namespace kw::agent::adapter_support {

// An empty file /tmp/kw-pass-XXXXXX-<tag> for a child to write.
std::filesystem::path temp_file(const std::string& tag);
// The file's JSON; a discarded value when it is missing or not JSON.
nlohmann::json read_json_file(const std::filesystem::path& file);
void remove_quietly(const std::filesystem::path& path);
common::ChildSpec bench_child(const BenchContext& context, double timeout_s);
// One implementation's measurement of a replicate: its samples and their median.
nlohmann::json measurement(std::vector<double> samples);
bool has_any(const std::vector<std::string>& args, std::initializer_list<const char*> flags);

}  // namespace kw::agent::adapter_support
