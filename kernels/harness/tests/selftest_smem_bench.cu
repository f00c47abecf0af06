// kw-selftest-smem-bench: a kernel asking for 160 KB of dynamic shared memory
// without raising its 48 KB default limit (the load stage must say so).
#include "selftest_cases.hpp"

int main(int argc, char** argv) {
  using namespace kwbench_selftest;
  kwbench::Registry::instance().add_kernel(
      {"big_smem_kernel", reinterpret_cast<const void*>(&big_smem_kernel), 256, 160 * 1024, {}});
  return kwbench::main(argc, argv);
}
