// A TEST DOUBLE of libkw_inject.so for hosts without a GPU, where CUPTI
// cannot inject: kwbench.py's CPU stand-in backend calls its marks and its
// record switch as it calls the real library's, and it writes the same lines
// (a start, marks, the maps and "paused" when switched off, an end at exit).
// Nothing runs on a GPU, so it stands in for that too: while recording, each
// case's mark is followed by one launch of saxpy_kernel (block 256), and the
// first by the module that holds it, whose code digest is the text of the
// file .kw-double-kernel in the working directory ("standin" without one): a
// test changes a side's "kernel code" by writing that file. Tests of the
// python preflight in one process use it (KW_INJECT_LIBRARY).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {

std::FILE* g_out = nullptr;
bool g_recording = true;

std::FILE* out() {
  if (g_out != nullptr) return g_out;
  const char* dir = std::getenv("KW_INJECT_OUT");
  if (dir == nullptr || *dir == '\0') return nullptr;
  const std::string path = std::string(dir) + "/launches-" + std::to_string(getpid()) + ".jsonl";
  g_out = std::fopen(path.c_str(), "a");
  if (g_out == nullptr) return nullptr;
  std::fprintf(g_out, "{\"start\": {\"pid\": %d, \"exe\": \"inject-double\"}}\n", static_cast<int>(getpid()));
  std::atexit([] {
    std::fprintf(g_out, "{\"maps\": []}\n{\"end\": {\"pid\": %d, \"launches\": 0, \"dropped\": 0}}\n",
                 static_cast<int>(getpid()));
    std::fclose(g_out);
  });
  return g_out;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int kw_inject_mark(const char* label) {
  std::FILE* file = out();
  if (file == nullptr || label == nullptr) return -1;
  std::fprintf(file, "{\"mark\": \"%s\"}\n", label);  // the stand-in's case names need no escaping
  if (g_recording && std::string(label).starts_with("case ")) {
    static bool module_written = false;
    if (!module_written) {
      std::string digest = "standin";
      if (std::ifstream kernel(".kw-double-kernel"); kernel) std::getline(kernel, digest);
      std::fprintf(file,
                   "{\"module\": {\"format\": \"cubin\", \"image\": \"%s\", \"kernels\": "
                   "{\"saxpy_kernel\": \"%s\"}}}\n",
                   digest.c_str(), digest.c_str());
      module_written = true;
    }
    std::fprintf(file,
                 "{\"kernel\": \"saxpy_kernel\", \"grid\": [8, 1, 1], \"block\": [256, 1, 1], "
                 "\"registers\": 16, \"static_smem\": 0, \"dynamic_smem\": 0, \"duration_ns\": 1000}\n");
  }
  std::fflush(file);
  return 0;
}

extern "C" __attribute__((visibility("default"))) int kw_inject_record(int on) {
  std::FILE* file = out();
  if (file == nullptr) return -1;
  if (g_recording && on == 0)
    std::fprintf(file, "{\"maps\": []}\n{\"paused\": {\"pid\": %d, \"launches\": 0, \"dropped\": 0}}\n",
                 static_cast<int>(getpid()));
  g_recording = on != 0;
  std::fflush(file);
  return 0;
}
