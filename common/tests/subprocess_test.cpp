// What a child that died said about why: the line a failed load's message
// carries, from real output of a Python import, a C++ exception and the
// dynamic loader.
#include "kw/common/subprocess.hpp"

#include <gtest/gtest.h>

namespace kw::common {
namespace {

std::string line_of(const std::string& tail) {
  ChildOutcome outcome;
  outcome.exit_code = 1;
  outcome.output_tail = tail;
  return outcome.error_line();
}

TEST(ChildOutcome, TheErrorLineIsTheExceptionItDiedOf) {
  EXPECT_EQ(
      line_of(
          "[kwbench.py] load\nTraceback (most recent call last):\n  File \"bench.py\", line 3, in <module>\n"
          "    import my_ext\nImportError: /tmp/b/my_ext.so: undefined symbol: _Z7forwardN2at6TensorE\n"),
      "ImportError: /tmp/b/my_ext.so: undefined symbol: _Z7forwardN2at6TensorE");
  EXPECT_EQ(
      line_of("Traceback (most recent call last):\n  ...\ntorch.OutOfMemoryError: CUDA out of memory.\n"),
      "torch.OutOfMemoryError: CUDA out of memory.");
  EXPECT_EQ(line_of("terminate called after throwing an instance of 'std::runtime_error'\n"
                    "  what():  kwbench: cudaMalloc failed: out of memory\nAborted\n"),
            "what():  kwbench: cudaMalloc failed: out of memory");
  EXPECT_EQ(
      line_of("./build/bench: error while loading shared libraries: libattn.so: cannot open shared object "
              "file: No such file or directory\n"),
      "error while loading shared libraries: libattn.so: cannot open shared object file: No such file or "
      "directory");
  EXPECT_EQ(line_of("building\nrunning 3 cases\n"), "");
}

}  // namespace
}  // namespace kw::common
