#include "pipeline/python_harness.hpp"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "kwbench_py.hpp"

namespace kw::agent {

namespace fs = std::filesystem;

fs::path python_harness_dir() {
  fs::path dir;
  if (const char* home = std::getenv("KW_HOME"); home != nullptr && *home != '\0') {
    dir = fs::path(home) / "python";
  } else {
    const char* user = std::getenv("HOME");
    dir = fs::path(user != nullptr ? user : "/tmp") / ".kw" / "python";
  }
  const fs::path file = dir / "kwbench.py";
  {
    std::ifstream in(file, std::ios::binary);
    std::stringstream held;
    held << in.rdbuf();
    if (in && held.str() == kKwbenchPy) return dir;
  }
  // Written beside, then renamed: a bench starting meanwhile reads the old
  // file whole or the new one whole.
  fs::create_directories(dir);
  const fs::path partial = dir / ("kwbench.py." + std::to_string(::getpid()));
  {
    std::ofstream out(partial, std::ios::binary | std::ios::trunc);
    out.write(kKwbenchPy.data(), static_cast<std::streamsize>(kKwbenchPy.size()));
    if (!out) throw std::runtime_error("cannot write " + partial.string());
  }
  fs::rename(partial, file);
  return dir;
}

std::map<std::string, std::string> bench_env(const BenchConfig& bench) {
  if (bench.format != BenchFormat::python) return {};
  std::string path = python_harness_dir().string();
  if (const char* existing = std::getenv("PYTHONPATH"); existing != nullptr && *existing != '\0')
    path += std::string(":") + existing;
  return {{"PYTHONPATH", path}};
}

}  // namespace kw::agent
