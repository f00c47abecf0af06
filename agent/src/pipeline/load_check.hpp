// load for benches of other harnesses (gbench, NVBench): what kwbench's load
// stage checks, from outside the process. Its symbols resolve (a listing run
// under LD_BIND_NOW, so a missing symbol fails at start, not in the middle of
// full_bench), and the bench and the repository's libraries it loads carry a
// kernel image this GPU can run (cuobjdump), with registers and static shared
// memory within what any launch allows.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kw::agent {

// A file's device code as `cuobjdump --list-elf` and `--list-ptx` name it:
// SASS per architecture ("sm_90", "sm_90a") and PTX ("sm_80" for compute_80).
struct KernelImages {
  std::vector<std::string> sass, ptx;
};
KernelImages parse_image_lists(const std::string& elf_list, const std::string& ptx_list);

// Empty when a device of compute capability `capability` ("9.0") can run
// `images` (SASS of its major version and a minor at most its own, "a"
// variants only on their exact architecture; else PTX of at most its
// version, compiled at load), else why not, naming what the file has.
std::string image_problem(const KernelImages& images, const std::string& capability);

// Kernels over the limits every launch has (255 registers per thread, 48 KiB
// of static shared memory), from `cuobjdump --dump-resource-usage`: one line
// per kernel, demangled where the name is a C++ one.
std::vector<std::string> resource_problems(const std::string& resource_usage);

// A CUDA toolkit program (cuobjdump, compute-sanitizer) from PATH, CUDA_HOME
// or /usr/local/cuda; empty when there is none.
std::filesystem::path find_cuda_tool(const std::string& name);

// The shared libraries `bench` loads from inside `root` (ldd), itself first.
std::vector<std::filesystem::path> files_with_device_code(const std::filesystem::path& bench,
                                                          const std::filesystem::path& root);

}  // namespace kw::agent
