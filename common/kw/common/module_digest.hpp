// The machine code of each kernel in a loaded CUDA module, as a digest per
// kernel: what a case's fingerprint holds of the kernels it launched
// (docs/detection.md, "Fingerprints"). libkw_inject.so digests every module
// the driver loads; tests digest cubins nvcc wrote.
//
// A cubin's kernel is its own sections (code, per-kernel attributes, its
// parameter bank, its shared memory size) with the module's data that every
// kernel may read (__constant__ and __device__ initialisers), and the
// architecture. Symbol indices are replaced by symbol names, so adding,
// removing or changing another kernel of the module leaves a kernel's digest
// as it was. Debug sections, notes (toolkit and command-line records) and the
// call graph are left out. An image that is not a cubin (PTX the driver
// compiles, a fat binary) gets one digest for all its kernels.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace kw::common {

struct ModuleDigests {
  std::string format;        // "cubin", "ptx" or "other"
  std::string image_digest;  // SHA-256 of the whole image
  // Mangled kernel name -> digest of its code. Empty for an image whose
  // kernels cannot be told apart ("other").
  std::map<std::string, std::string> kernels;
  std::string problem;  // why a cubin could not be read; then format is "other"
};

ModuleDigests module_digests(std::string_view image);

// A host executable or library, for the agent's host code digests: the
// bytes of its read-only data at an address, and its named data objects.
class HostImage {
 public:
  // Throws std::runtime_error for a file that is not a 64-bit ELF.
  explicit HostImage(std::string bytes);
  ~HostImage();
  HostImage(const HostImage&) = delete;
  HostImage& operator=(const HostImage&) = delete;
  HostImage(HostImage&&) = delete;
  HostImage& operator=(HostImage&&) = delete;

  // Up to `size` bytes of .rodata at a virtual address; empty outside it.
  std::string_view rodata_at(std::uint64_t address, std::size_t size) const;
  // The named objects of .rodata, .data and .tdata (static tables, globals'
  // initial values), each by its name: the words the dynamic loader
  // relocates zeroed (addresses move with the layout) and every occurrence
  // of `build_root` taken out (__FILE__ names the checkout the build ran
  // in, and a base is built in another). Unnamed data (string literals,
  // jump tables) is not in it: its bytes move with the layout.
  // `normalise`, where given, rewrites each object's name and content
  // first (type names hold nvcc's path-derived namespace names).
  std::string objects_digest(std::string_view build_root,
                             const std::function<void(std::string&)>& normalise = {}) const;

 private:
  struct Parsed;
  std::string bytes_;
  std::unique_ptr<Parsed> parsed_;
};

}  // namespace kw::common
