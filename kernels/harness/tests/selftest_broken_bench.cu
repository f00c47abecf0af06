// kw-selftest-broken-bench: one case per failure a stage exists to catch,
// plus a correct case that must still pass beside them.
#include "selftest_cases.hpp"

namespace {
constexpr std::size_t n = std::size_t{1} << 24;
}

int main(int argc, char** argv) {
  using namespace kwbench_selftest;
  auto& registry = kwbench::Registry::instance();
  registry.add_case([] { return std::make_unique<ScaleCase>("broken.ok", n, Variant::good); });
  registry.add_case([] { return std::make_unique<ScaleCase>("broken.block128", n, Variant::block128); });
  registry.add_case([] { return std::make_unique<ScaleCase>("broken.unwritten", n, Variant::unwritten); });
  registry.add_case([] { return std::make_unique<ScaleCase>("broken.nan", n, Variant::nan); });
  registry.add_case([] { return std::make_unique<ScaleCase>("broken.slow", n, Variant::slow); });
  registry.add_case([] { return std::make_unique<ScaleCase>("broken.fault", n, Variant::fault); });
  // Not a multiple of the allocation granularity: its one write past the end
  // stays inside what the driver mapped.
  registry.add_case([] { return std::make_unique<ScaleCase>("broken.overrun", n - 1000, Variant::overrun); });
  return kwbench::main(argc, argv);
}
