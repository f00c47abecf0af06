// Fresh directories for a test (tests only).
#pragma once

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace kw::testing {

inline std::filesystem::path make_temp_dir(const std::string& prefix,
                                           const std::filesystem::path& parent = "/tmp") {
  std::string pattern = (parent / (prefix + "-XXXXXX")).string();
  if (mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error("mkdtemp in " + parent.string() + " failed");
  return pattern;
}

// A fresh directory for a PostgreSQL cluster: beside the clusters ctest's
// fixtures made (KW_TEST_PG_DIR's or KW_TEST_SERVER_SEED's folder, tmpfs
// where the build found room: cmake/KwTestClusters.cmake), else under /tmp.
inline std::filesystem::path make_cluster_dir(const std::string& prefix) {
  for (const char* fixture : {"KW_TEST_PG_DIR", "KW_TEST_SERVER_SEED"}) {
    const char* dir = std::getenv(fixture);
    if (dir != nullptr && *dir != '\0')
      return make_temp_dir(prefix, std::filesystem::path(dir).parent_path());
  }
  return make_temp_dir(prefix);
}

}  // namespace kw::testing
