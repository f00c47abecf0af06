// kw init over small repositories of each kind it knows, written here: a
// CMake project with a Google Benchmark target (configured with the real
// cmake, and read from its files alone), an NVBench target in a CMake file,
// a PyTorch CUDA extension and Triton kernels. What it writes must be a
// kernelwatch.json kw run reads, and a bench script Python compiles.
#include <gtest/gtest.h>

#include <fstream>

#include "../../tests/support/subprocess.hpp"
#include "../../tests/support/temp_dir.hpp"
#include "init_command.hpp"
#include "repo_config.hpp"

namespace kw::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

void write(const fs::path& file, const std::string& text) {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
}

void expect_python_compiles(const std::string& text) {
  const fs::path dir = kw::testing::make_temp_dir("kw-init-script");
  write(dir / "kernelwatch_bench.py", text);
  auto compiled = kw::testing::run_command(
      {"/usr/bin/python3", "-m", "py_compile", (dir / "kernelwatch_bench.py").string()});
  EXPECT_EQ(compiled.exit_code, 0) << compiled.output << "\n" << text;
  fs::remove_all(dir);
}

const char* kGbenchCmake = R"(cmake_minimum_required(VERSION 3.16)
project(micro CXX)
find_package(benchmark REQUIRED)
add_executable(sort_bench bench/sort.cpp)
target_link_libraries(sort_bench PRIVATE benchmark::benchmark)
add_executable(tool tool.cpp)
)";

TEST(InitCommand, ACMakeProjectsGoogleBenchmarkTargetAsBuilt) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-cmake");
  write(repo / "CMakeLists.txt", kGbenchCmake);
  write(repo / "bench/sort.cpp", "#include <benchmark/benchmark.h>\nBENCHMARK_MAIN();\n");
  write(repo / "tool.cpp", "int main() { return 0; }\n");
  const Inspection found = inspect_repository(repo, "build", true);
  ASSERT_EQ(found.benches.size(), 1u) << json(found.notes).dump();
  EXPECT_EQ(found.benches[0].format, "gbench");
  EXPECT_EQ(found.benches[0].path, "build/sort_bench") << "the artifact as CMake places it";
  EXPECT_NE(found.benches[0].how.find("CMake target sort_bench links Google Benchmark"), std::string::npos);
  const RepoConfig config = parse_repo_config(repo_config_of(found));
  EXPECT_EQ(config.build_commands.back(), "cmake --build build --target sort_bench");
  EXPECT_EQ(config.benches[0].format, BenchFormat::gbench);
  fs::remove_all(repo);
}

TEST(InitCommand, WithoutAConfigureTheCMakeFilesAreReadAndThePathIsAGuess) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-nvbench");
  write(repo / "CMakeLists.txt", "project(kernels CUDA CXX)\nadd_subdirectory(benches)\n");
  write(repo / "benches/CMakeLists.txt",
        "add_executable(copy_bench copy.cu)\ntarget_link_libraries(copy_bench PRIVATE nvbench::main)\n");
  const Inspection found = inspect_repository(repo, "build", false);
  ASSERT_EQ(found.benches.size(), 1u);
  EXPECT_EQ(found.benches[0].format, "nvbench");
  EXPECT_EQ(found.benches[0].name, "copy_bench");
  EXPECT_EQ(found.benches[0].path, "build/benches/copy_bench");
  ASSERT_FALSE(found.todos.empty());
  EXPECT_NE(found.todos[0].find("guessed from benches/CMakeLists.txt"), std::string::npos) << found.todos[0];
  parse_repo_config(repo_config_of(found));
  fs::remove_all(repo);
}

TEST(InitCommand, APyTorchExtensionGetsABenchScriptWithACasePerBoundFunction) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-torch");
  write(repo / "setup.py",
        "from setuptools import setup\nfrom torch.utils.cpp_extension import BuildExtension, CUDAExtension\n"
        "setup(name='fused', ext_modules=[CUDAExtension('fused_ops', ['csrc/ops.cpp', 'csrc/ops.cu'])],\n"
        "      cmdclass={'build_ext': BuildExtension})\n");
  write(repo / "csrc/ops.cu",
        "template <int N> __global__ void __launch_bounds__(256) fused_softmax_kernel(float* x) {}\n");
  write(repo / "csrc/ops.cpp",
        "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n  m.def(\"forward\", &forward);\n"
        "  m.def(\"backward\", &backward);\n}\n");
  const Inspection found = inspect_repository(repo, "build", true);
  ASSERT_EQ(found.benches.size(), 1u);
  EXPECT_EQ(found.benches[0].format, "python");
  EXPECT_EQ(found.build_commands, std::vector<std::string>{"python3 setup.py build_ext --inplace"});
  EXPECT_NE(found.script_text.find("import fused_ops"), std::string::npos);
  EXPECT_NE(found.script_text.find("class Forward(kwbench.Case)"), std::string::npos);
  EXPECT_NE(found.script_text.find("class Backward(kwbench.Case)"), std::string::npos);
  EXPECT_NE(found.script_text.find("return fused_ops.forward()  # TODO"), std::string::npos);
  EXPECT_NE(found.script_text.find("kwbench.Launch(\"fused_softmax_kernel*\""), std::string::npos);
  EXPECT_NE(found.script_text.find("modules=[\"fused_ops\"]"), std::string::npos);
  expect_python_compiles(found.script_text);
  const RepoConfig config = parse_repo_config(repo_config_of(found));
  EXPECT_EQ(config.benches[0].format, BenchFormat::python);
  fs::remove_all(repo);
}

TEST(InitCommand, TritonKernelsGetABenchScriptWithACasePerKernel) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-triton");
  write(repo / "kernels/add.py",
        "import torch\nimport triton\nimport triton.language as tl\n\n"
        "@triton.jit\ndef add_kernel(x, y, out, n, BLOCK: tl.constexpr):\n    pass\n\n"
        "@triton.autotune(configs=[], key=['n'])\n@triton.jit\ndef scale_kernel(x, n):\n    pass\n");
  const Inspection found = inspect_repository(repo, "build", true);
  ASSERT_EQ(found.benches.size(), 1u);
  EXPECT_EQ(found.benches[0].name, "triton");
  EXPECT_NE(found.script_text.find("import kernels.add"), std::string::npos);
  EXPECT_NE(found.script_text.find("class AddKernel(kwbench.Case)"), std::string::npos);
  EXPECT_NE(found.script_text.find("class ScaleKernel(kwbench.Case)"), std::string::npos);
  EXPECT_NE(found.script_text.find("kwbench.Launch(\"scale_kernel*\""), std::string::npos);
  expect_python_compiles(found.script_text);
  parse_repo_config(repo_config_of(found));
  fs::remove_all(repo);
}

TEST(InitCommand, NothingFoundSaysWhatToAdd) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-empty");
  write(repo / "README.md", "nothing to measure\n");
  const Inspection found = inspect_repository(repo, "build", true);
  EXPECT_TRUE(found.benches.empty());
  ASSERT_EQ(found.todos.size(), 1u);
  EXPECT_NE(found.todos[0].find("no bench found"), std::string::npos);
  fs::remove_all(repo);
}

}  // namespace
}  // namespace kw::agent
