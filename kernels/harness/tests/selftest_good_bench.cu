// kw-selftest-bench: correct cases at several sizes (every stage passes);
// also the bench whose full_bench is run twice for the noise figure.
#include "selftest_cases.hpp"

int main(int argc, char** argv) {
  using namespace kwbench_selftest;
  auto& registry = kwbench::Registry::instance();
  for (std::size_t n :
       {std::size_t{1} << 22, std::size_t{1} << 25, std::size_t{1} << 27, std::size_t{1} << 28}) {
    registry.add_case([n] {
      return std::make_unique<ScaleCase>("selftest.scale/n" + std::to_string(n), n, Variant::good);
    });
  }
  registry.add_kernel({"scale_kernel", reinterpret_cast<const void*>(&scale_kernel), 384, 0, {}});
  return kwbench::main(argc, argv);
}
