// kwbench.py, the python harness (kernels/python/kwbench.py), as this kw
// carries it: kw writes it to a folder of its own and puts that folder on a
// python bench's PYTHONPATH, so a repository imports kwbench without keeping
// a copy (one it keeps beside its script still wins: Python looks there first).
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "project/repo_config.hpp"

namespace kw::agent {

// The folder holding this kw's kwbench.py ($KW_HOME/python, default
// ~/.kw/python), written there when missing or different.
std::filesystem::path python_harness_dir();

// The environment a bench's processes get besides the agent's own: for a
// python bench, PYTHONPATH led by python_harness_dir().
std::map<std::string, std::string> bench_env(const BenchConfig& bench);

}  // namespace kw::agent
