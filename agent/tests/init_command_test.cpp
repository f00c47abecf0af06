// kw init over small Python repositories of each kind it knows, written
// here: PyTorch CUDA extensions and Triton kernels, with the benchmarks a
// team already has (perf_report, do_bench, torch Timer, TritonBench
// operators). What it writes must be a kernelwatch.json kw run reads, and a
// bench script Python compiles. CMake projects: init_cmake_test.cpp.
#include <gtest/gtest.h>

#include <fstream>

#include "../../tests/support/subprocess.hpp"
#include "../../tests/support/temp_dir.hpp"
#include "cli/init_command.hpp"
#include "init_test_support.hpp"
#include "project/repo_config.hpp"

namespace kw::agent {
namespace {

namespace fs = std::filesystem;
using init_testing::only;
using init_testing::write;
using nlohmann::json;

void expect_python_compiles(const std::string& text) {
  const fs::path dir = kw::testing::make_temp_dir("kw-init-script");
  write(dir / "kernelwatch_bench.py", text);
  auto compiled = kw::testing::run_command(
      {"/usr/bin/python3", "-m", "py_compile", (dir / "kernelwatch_bench.py").string()});
  EXPECT_EQ(compiled.exit_code, 0) << compiled.output << "\n" << text;
  fs::remove_all(dir);
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
  const Inspection found = inspect_repository(repo, {});
  ASSERT_EQ(found.benches.size(), 1u);
  EXPECT_EQ(found.benches[0].format, "python");
  EXPECT_EQ(found.build_commands, std::vector<std::string>{"python3 setup.py build_ext --inplace"});
  EXPECT_NE(found.script_text.find("import fused_ops"), std::string::npos);
  EXPECT_NE(found.script_text.find("class Forward(kwbench.Case)"), std::string::npos);
  EXPECT_NE(found.script_text.find("class Backward(kwbench.Case)"), std::string::npos);
  EXPECT_NE(found.script_text.find("return fused_ops.forward()  # TODO"), std::string::npos);
  EXPECT_NE(found.script_text.find("kwbench.Launch(\"*fused_softmax_kernel*\""), std::string::npos);
  EXPECT_NE(found.script_text.find("modules=[\"fused_ops\"]"), std::string::npos);
  expect_python_compiles(found.script_text);
  const RepoConfig config = parse_repo_config(repo_config_of(found));
  EXPECT_EQ(config.benches[0].format, BenchFormat::python);
  fs::remove_all(repo);
}

// A small extension repository with no setup.py: its bench script builds the
// module with torch.utils.cpp_extension's load() under another name. The
// generated script makes the repository's own call (its sources relative to
// the script's folder, __file__ as there), builds into this checkout's
// build/, reaches the module through the call's result (it is no importable
// name), and lists what the call uses that its file defined.
TEST(InitCommand, AnExtensionBuiltByLoadInAScriptIsBuiltByTheSameCall) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-load");
  write(repo / "bench/run.py",
        "import os\nimport torch\nfrom torch.utils.cpp_extension import load as jit_build\n\n"
        "flags = ['-O3']\n"
        "ops = jit_build(\n    name='tiny_ops',\n"
        "    sources=[os.path.join(os.path.dirname(__file__), 'ops.cpp'), 'kernels/ops.cu'],\n"
        "    extra_cuda_cflags=flags,  # the team's flags\n    verbose=True,\n)\n");
  write(repo / "bench/ops.cpp",
        "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n  m.def(\"scale\", &scale);\n}\n");
  write(repo / "bench/kernels/ops.cu", "__global__ void scale_kernel(float* x) {}\n");
  write(repo / "tests/test_ops.py", "def scale_ref(x):\n    return 2 * x\n");
  const Inspection found = inspect_repository(repo, {});
  ASSERT_EQ(found.benches.size(), 1u) << json(found.notes).dump();
  std::string notes;
  for (const std::string& note : found.notes) notes += note + "\n";
  EXPECT_NE(notes.find("PyTorch CUDA extension \"tiny_ops\" (load() in bench/run.py), 1 bound function(s)"),
            std::string::npos)
      << notes;
  EXPECT_EQ(found.build_commands, std::vector<std::string>{"python3 kernelwatch_bench.py --build-extension"});
  const std::string& script = found.script_text;
  EXPECT_EQ(script.find("import tiny_ops"), std::string::npos) << script;
  EXPECT_EQ(script.find("modules="), std::string::npos) << script;
  EXPECT_NE(script.find("tiny_ops = build_extension()"), std::string::npos) << script;
  EXPECT_NE(script.find("return tiny_ops.scale()  # TODO"), std::string::npos) << script;
  EXPECT_NE(script.find("torch.utils.cpp_extension.load(\n    name='tiny_ops'"), std::string::npos) << script;
  EXPECT_NE(script.find("os.path.join(os.path.dirname(os.path.join(_here, \"run.py\")), 'ops.cpp')"),
            std::string::npos)
      << script;
  EXPECT_NE(script.find("build_directory=_build_directory()"), std::string::npos) << script;
  EXPECT_NE(script.find("# the repository has scale_ref (tests/test_ops.py): e.g. return "
                        "tests.test_ops.scale_ref(...)"),
            std::string::npos)
      << script;
  EXPECT_NE(json(found.todos).dump().find("build_extension() uses flags, which bench/run.py defines"),
            std::string::npos)
      << json(found.todos).dump();
  expect_python_compiles(script);

  // The build command runs the call as the repository's script would, with
  // a TEST DOUBLE of PyTorch (there is none here) that checks what load() gets.
  write(repo / "kernelwatch_bench.py", "flags = ['-O3']\n" + script);
  write(repo / "stand-in/torch/__init__.py", "");
  write(repo / "stand-in/torch/utils/__init__.py", "");
  write(repo / "stand-in/torch/utils/cpp_extension.py",
        "import os\n"
        "def load(name, sources, build_directory, **kwargs):\n"
        "    missing = [s for s in sources if not os.path.exists(s)]\n"
        "    assert not missing, 'sources not found from %s: %s' % (os.getcwd(), missing)\n"
        "    assert os.path.isdir(build_directory), build_directory\n"
        "    print('built', name, 'in', build_directory, 'with', kwargs['extra_cuda_cflags'])\n");
  auto built = kw::testing::run_command({"/usr/bin/env", "PYTHONPATH=" + (repo / "stand-in").string(),
                                         "/usr/bin/python3", (repo / "kernelwatch_bench.py").string(),
                                         "--build-extension"});
  EXPECT_EQ(built.exit_code, 0) << built.output;
  EXPECT_NE(built.output.find("built tiny_ops in " + (repo / "build/torch-extensions/tiny_ops").string() +
                              " with ['-O3']"),
            std::string::npos)
      << built.output;
  fs::remove_all(repo);
}

// Every spelling of load and load_inline a script may use.
TEST(InitCommand, LoadInlineThroughAModuleAliasIsFoundToo) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-load-inline");
  write(repo / "ext.py",
        "import torch.utils.cpp_extension as ce\n"
        "mod = ce.load_inline(name=\"inline_ops\", cpp_sources=[\"\"], cuda_sources=[\"\"], "
        "functions=[\"go\"])\n");
  const Inspection found = inspect_repository(repo, {});
  ASSERT_EQ(found.benches.size(), 1u) << json(found.notes).dump();
  EXPECT_NE(found.script_text.find("torch.utils.cpp_extension.load_inline(name=\"inline_ops\""),
            std::string::npos)
      << found.script_text;
  EXPECT_NE(found.script_text.find("inline_ops = build_extension()"), std::string::npos) << found.script_text;
  EXPECT_EQ(found.build_commands, std::vector<std::string>{"python3 kernelwatch_bench.py --build-extension"});
  expect_python_compiles(found.script_text);
  fs::remove_all(repo);
}

TEST(InitCommand, TritonKernelsGetABenchScriptWithACasePerKernel) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-triton");
  write(repo / "kernels/add.py",
        "import torch\nimport triton\nimport triton.language as tl\n\n"
        "@triton.jit\ndef add_kernel(x, y, out, n, BLOCK: tl.constexpr):\n    pass\n\n"
        "@triton.autotune(configs=[], key=['n'])\n@triton.jit\ndef scale_kernel(x, n):\n    pass\n");
  const Inspection found = inspect_repository(repo, {});
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

// A module with one Triton kernel and the launcher that launches it.
std::string triton_module(const std::string& kernel, const std::string& launcher) {
  return "import torch\nimport triton\n\n@triton.jit\ndef " + kernel + "(x, n):\n    pass\n\ndef " +
         launcher + "(x):\n    " + kernel + "[(1,)](x, x.numel())\n    return x\n";
}

// A src-layout package: its modules are imported as its tests import them
// (mykern.ops, not src.mykern.ops), from src/; a plain folder's module keeps
// its folder (kernels.add).
TEST(InitCommand, ASrcLayoutPackageIsImportedAsItsTestsImportIt) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-src-layout");
  write(repo / "src/mykern/__init__.py", "");
  write(repo / "src/mykern/ops.py", triton_module("relu_kernel", "relu"));
  write(repo / "tests/test_ops.py", "from mykern.ops import relu\n");
  const Inspection found = inspect_repository(repo, {});
  ASSERT_EQ(found.benches.size(), 1u);
  EXPECT_NE(
      found.script_text.find("sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "
                             "\"src\"))\nimport mykern.ops\n"),
      std::string::npos)
      << found.script_text;
  EXPECT_EQ(found.script_text.find("src.mykern"), std::string::npos) << found.script_text;
  expect_python_compiles(found.script_text);
  fs::remove_all(repo);
}

// A repository with its own perf_report script (a Triton tutorial's shape)
// and a kernel no benchmark covers: the script is tracked as it is, and the
// skeleton has a case only for the uncovered kernel. kw init's own earlier
// script is no call site: the kernel only it launches is no case.
TEST(InitCommand, PerfReportScriptsAreTrackedAsTheyAreAndOnlyUncoveredKernelsGetACase) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-perf-report");
  write(repo / "python/tutorials/02-fused-softmax.py",
        "import torch\nimport triton\nimport triton.language as tl\n\n"
        "@triton.jit\ndef softmax_kernel(out_ptr, in_ptr, n_cols, BLOCK: tl.constexpr):\n    pass\n\n"
        "def softmax(x):\n    y = torch.empty_like(x)\n    softmax_kernel[(x.shape[0],)](y, x, x.shape[1], "
        "BLOCK=1024)\n"
        "    return y\n\n"
        "@triton.testing.perf_report(triton.testing.Benchmark(x_names=['N'], x_vals=[256, 512], "
        "line_arg='provider', line_vals=['triton', 'torch'], line_names=['Triton', 'Torch'], "
        "plot_name='softmax-performance', args={'M': 4096}))\n"
        "def benchmark(M, N, provider):\n    x = torch.randn(M, N, device='cuda')\n"
        "    fn = (lambda: softmax(x)) if provider == 'triton' else (lambda: torch.softmax(x, axis=-1))\n"
        "    return triton.testing.do_bench(fn)\n\n"
        "benchmark.run(show_plots=True, print_data=True)\n");
  write(repo / "kernels/add.py",
        "import torch\nimport triton\nimport triton.language as tl\n\n"
        "@triton.jit\ndef add_kernel(x, y, out, n, BLOCK: tl.constexpr):\n    pass\n\n"
        "@triton.jit\ndef scale_kernel(x, n):\n    pass\n\n"
        "def add(x, y):\n    out = torch.empty_like(x)\n    add_kernel[(1,)](x, y, out, x.numel(), "
        "BLOCK=1024)\n"
        "    return out\n");
  write(repo / "kernelwatch_bench.py", "import kernels.add\nkernels.add.scale_kernel[(1,)](x, 4)\n");
  write(repo / "kernels/mul.py", triton_module("mul_kernel", "mul"));
  // A sweep timed with do_bench is tracked too, and covers the kernels of
  // the module it imports; a test calling do_bench is no benchmark.
  write(repo / "bench/sweep.py",
        "import triton\nfrom kernels.add import add\nfor n in (1024, 4096):\n"
        "    triton.testing.do_bench(lambda: add(x, x))\n");
  write(repo / "tests/test_add.py", "import triton\ntriton.testing.do_bench(lambda: 0)\n");
  const Inspection found = inspect_repository(repo, {});
  ASSERT_EQ(found.benches.size(), 3u);
  EXPECT_EQ(found.benches[0].name, "sweep");
  EXPECT_EQ(found.benches[0].format, "do_bench");
  EXPECT_EQ(found.benches[0].path, "bench/sweep.py");
  EXPECT_EQ(found.benches[1].name, "02-fused-softmax");
  EXPECT_EQ(found.benches[1].format, "perf_report");
  EXPECT_EQ(found.benches[2].name, "triton");
  EXPECT_NE(found.script_text.find("class MulKernel(kwbench.Case)"), std::string::npos) << found.script_text;
  EXPECT_EQ(found.script_text.find("AddKernel"), std::string::npos) << "covered by the sweep";
  EXPECT_EQ(found.script_text.find("SoftmaxKernel"), std::string::npos) << "covered by its perf_report";
  EXPECT_EQ(found.script_text.find("ScaleKernel"), std::string::npos)
      << "launched only by kw init's own script";
  expect_python_compiles(found.script_text);
  const json config = repo_config_of(found);
  EXPECT_EQ(config["benches"][1]["format"], "perf_report");
  EXPECT_EQ(parse_repo_config(config).benches[0].form, "do_bench");
  fs::remove_all(repo);
}

// Kernels of one name in two modules (each attention variant's
// _fwd_kernel), and two whose class names would match (_scale, scale): every
// case class and case name is defined once, and the script compiles.
TEST(InitCommand, KernelsOfOneNameInTwoModulesGetClassesOfTheirOwn) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-same-names");
  write(repo / "kernels/attention.py", triton_module("_fwd_kernel", "attention"));
  write(repo / "kernels/layernorm.py", triton_module("_fwd_kernel", "layernorm"));
  write(repo / "kernels/scale.py", triton_module("_scale", "scale") + triton_module("scale", "scale_again"));
  const Inspection found = inspect_repository(repo, {});
  ASSERT_EQ(found.benches.size(), 1u) << json(found.notes).dump();
  const std::string& script = found.script_text;
  for (const char* defined :
       {"class AttentionFwdKernel(kwbench.Case)", "class LayernormFwdKernel(kwbench.Case)",
        "class Scale(kwbench.Case)", "class Scale2(kwbench.Case)", "name = \"attention/_fwd_kernel\"",
        "name = \"layernorm/_fwd_kernel\""}) {
    const auto at = script.find(defined);
    EXPECT_NE(at, std::string::npos) << defined << "\n" << script;
    EXPECT_EQ(script.find(defined, at + 1), std::string::npos) << "twice: " << defined;
  }
  expect_python_compiles(script);
  fs::remove_all(repo);
}

// A package with copies of its kernels for other accelerators' backends
// (_ascend/, backends/amd/): those are left out, said by folder; the CUDA
// ones (_nvidia/) and the package's own are cases.
TEST(InitCommand, OtherBackendsCopiesOfTheKernelsAreLeftOutWithANote) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-backends");
  write(repo / "src/gems/__init__.py", "");
  write(repo / "src/gems/ops/add.py", triton_module("add_kernel", "add"));
  write(repo / "src/gems/runtime/backend/_nvidia/mm.py", triton_module("mm_kernel", "mm"));
  write(repo / "src/gems/runtime/backend/_ascend/add.py", triton_module("add_kernel", "add"));
  write(repo / "src/gems/runtime/backend/_ascend/mm.py", triton_module("mm_kernel", "mm"));
  write(repo / "backends/amd/softmax.py", triton_module("softmax_kernel", "softmax"));
  const Inspection found = inspect_repository(repo, {});
  ASSERT_EQ(found.benches.size(), 1u) << json(found.notes).dump();
  const std::string& script = found.script_text;
  EXPECT_NE(script.find("class AddKernel(kwbench.Case)"), std::string::npos) << script;
  EXPECT_NE(script.find("class MmKernel(kwbench.Case)"), std::string::npos) << script;
  EXPECT_EQ(script.find("SoftmaxKernel"), std::string::npos) << script;
  EXPECT_EQ(script.find("_ascend"), std::string::npos) << script;
  const std::string notes = json(found.notes).dump();
  EXPECT_NE(notes.find("2 @triton.jit function(s) in src/gems/runtime/backend/_ascend/ left out: a copy for "
                       "another accelerator's backend"),
            std::string::npos)
      << notes;
  EXPECT_NE(notes.find("1 @triton.jit function(s) in backends/amd/ left out"), std::string::npos) << notes;
  expect_python_compiles(script);
  fs::remove_all(repo);
}

// A script timing a PyTorch extension's ops with torch.utils.benchmark's
// Timer is tracked as it is ("format": "do_bench"), with no Triton in it.
TEST(InitCommand, ATorchTimerScriptIsTrackedAsItIs) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-torch-timer");
  write(repo / "benchmarks/bench_ops.py",
        "import torch\nimport torch.utils.benchmark as benchmark\n\n"
        "for n in (1024, 4096):\n    x = torch.randn(n, device='cuda')\n"
        "    for op in ('mine', 'torch'):\n"
        "        print(benchmark.Timer(stmt='f(x)', globals={'f': torch.relu, 'x': x}, description=op)"
        ".blocked_autorange())\n");
  write(repo / "tests/test_timer.py", "import torch.utils.benchmark as b\nb.Timer(stmt='1').timeit(1)\n");
  const Inspection found = inspect_repository(repo, {});
  ASSERT_EQ(found.benches.size(), 1u) << json(found.notes).dump();
  EXPECT_EQ(found.benches[0].name, "bench_ops");
  EXPECT_EQ(found.benches[0].format, "do_bench");
  EXPECT_EQ(found.benches[0].path, "benchmarks/bench_ops.py");
  fs::remove_all(repo);
}

// A repository in TritonBench's layout: each operator with registered
// benchmarks is tracked as it is ("format": "tritonbench"), named by its
// directory, and the kernels of the modules it imports get no skeleton case;
// an operators/ directory without @register_benchmark is no operator.
TEST(InitCommand, TritonBenchOperatorsAreTrackedAsTheyAre) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-tritonbench");
  write(repo / "tritonbench/kernels/softmax.py", triton_module("softmax_kernel", "softmax"));
  write(repo / "tritonbench/operators/softmax/__init__.py", "from .operator import Operator\n");
  write(repo / "tritonbench/operators/softmax/operator.py",
        "import torch\nfrom tritonbench.kernels.softmax import softmax\n"
        "from tritonbench.utils.triton_op import BenchmarkOperator, register_benchmark\n\n"
        "class Operator(BenchmarkOperator):\n"
        "    @register_benchmark(baseline=True)\n    def naive_softmax(self, x):\n"
        "        return lambda: torch.softmax(x, -1)\n\n"
        "    @register_benchmark()\n    def triton_softmax(self, x):\n        return lambda: softmax(x)\n\n"
        "    def get_input_iter(self):\n        yield (torch.randn(4, 4096, device='cuda'),)\n");
  write(repo / "tritonbench/operators/helpers/operator.py", "def unused():\n    pass\n");
  const Inspection found = inspect_repository(repo, {});
  ASSERT_EQ(found.benches.size(), 1u) << json(found.notes).dump();
  EXPECT_EQ(found.benches[0].name, "softmax");
  EXPECT_EQ(found.benches[0].format, "tritonbench");
  EXPECT_EQ(found.benches[0].path, "tritonbench/operators/softmax/operator.py");
  EXPECT_TRUE(found.script_text.empty()) << "the operator covers softmax_kernel: " << found.script_text;
  const BenchConfig bench = parse_repo_config(repo_config_of(found)).benches[0];
  EXPECT_EQ(bench.form, "tritonbench");
  EXPECT_EQ(bench_command(bench, "/checkout")[3], "--tritonbench");
  fs::remove_all(repo);
}

// Triton's tutorial shape: a launcher that sets num_warps = 8, a reference
// in torch (naive_softmax), a call of the launcher on an input made from
// torch alone, and a benchmark sweep that runs at import. The case calls the
// launcher with that input, expects 256-thread blocks, uses the reference,
// and the sweep is a TODO with its line.
TEST(InitCommand, ATritonSkeletonUsesTheLauncherItsInputsItsWarpsAndItsReference) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-triton-launcher");
  write(repo / "softmax.py",
        "import torch\nimport triton\nimport triton.language as tl\n\n\n"
        "def naive_softmax(x):\n    z = x - x.max(dim=1)[0][:, None]\n    n = torch.exp(z)\n"
        "    return n / n.sum(dim=1)[:, None]\n\n\n"
        "@triton.jit\ndef softmax_kernel(out_ptr, in_ptr, n_cols, BLOCK: tl.constexpr):\n    pass\n\n\n"
        "def softmax(x):\n    n_rows, n_cols = x.shape\n    num_warps = 8\n    y = torch.empty_like(x)\n"
        "    softmax_kernel[(n_rows,)](y, x, n_cols, BLOCK=triton.next_power_of_2(n_cols), "
        "num_warps=num_warps)\n"
        "    return y\n\n\n"
        "torch.manual_seed(0)\nx = torch.randn(1823, 781, device='cuda')\ny_triton = softmax(x)\n"
        "benchmark.run(show_plots=True, print_data=True)\n");
  const Inspection found = inspect_repository(repo, {});
  ASSERT_EQ(found.benches.size(), 1u) << json(found.notes).dump();
  const std::string& script = found.script_text;
  EXPECT_NE(script.find("        self.x = torch.randn(1823, 781, device='cuda')\n"), std::string::npos)
      << script;
  EXPECT_NE(script.find("return softmax.softmax(self.x)  # as softmax.py:27 calls it"), std::string::npos)
      << script;
  EXPECT_EQ(script.find("TODO: make the inputs"), std::string::npos) << "every input is made\n" << script;
  EXPECT_NE(script.find("kwbench.Launch(\"softmax_kernel*\", block=(256, 1, 1))"), std::string::npos)
      << script;
  EXPECT_NE(script.find("Its block: num_warps = 8 in softmax()."), std::string::npos) << script;
  EXPECT_NE(script.find("return softmax.naive_softmax(self.x)"), std::string::npos) << script;
  std::string todos;
  for (const std::string& todo : found.todos) todos += todo + "\n";
  EXPECT_NE(todos.find("softmax.py:28 runs `benchmark.run(show_plots=True, print_data=True)` when imported"),
            std::string::npos)
      << todos;
  EXPECT_EQ(todos.find("manual_seed"), std::string::npos) << todos;
  expect_python_compiles(script);
  fs::remove_all(repo);
}

// A launcher that takes num_warps from a helper and returns a tuple (the
// output and its statistics, as a layer norm's forward does): the block is
// said to be unknown, never Triton's default guessed, and the first value
// returned is what the reference is held to.
TEST(InitCommand, WarpsFromAHelperAreUnknownAndATupleLaunchersFirstValueIsChecked) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-warps-helper");
  write(repo / "layernorm.py",
        "import torch\nimport triton\nimport triton.language as tl\n\n\n"
        "def warps_for(block):\n    return min(max(block // 256, 1), 8)\n\n\n"
        "@triton.jit\ndef layernorm_kernel(out_ptr, mean_ptr, in_ptr, n_cols, BLOCK: tl.constexpr):\n"
        "    pass\n\n\n"
        "def layernorm(x):\n    n_rows, n_cols = x.shape\n    BLOCK = triton.next_power_of_2(n_cols)\n"
        "    y = torch.empty_like(x)\n    mean = torch.empty(n_rows, device=x.device)\n"
        "    layernorm_kernel[(n_rows,)](y, mean, x, n_cols, BLOCK=BLOCK, num_warps=warps_for(BLOCK))\n"
        "    return y, (mean, n_cols)\n\n\n"
        "x = torch.randn(64, 4096, device='cuda')\ny, stats = layernorm(x)\n");
  const Inspection found = inspect_repository(repo, {});
  ASSERT_EQ(found.benches.size(), 1u) << json(found.notes).dump();
  const std::string& script = found.script_text;
  EXPECT_NE(script.find("kwbench.Launch(\"layernorm_kernel*\", block=None)"), std::string::npos) << script;
  EXPECT_NE(script.find("layernorm() sets num_warps to `warps_for(BLOCK)`, which kw init does not follow"),
            std::string::npos)
      << script;
  EXPECT_EQ(script.find("128 threads"), std::string::npos) << "no default guessed\n" << script;
  EXPECT_NE(script.find("return layernorm.layernorm(self.x)[0]"), std::string::npos) << script;
  EXPECT_NE(script.find("it returns 2 values, the first compared with the reference"), std::string::npos)
      << script;
  expect_python_compiles(script);
  fs::remove_all(repo);
}

// A reference whose signature does not match the launcher's call (a test
// module's torch_softmax(x, dim, dtype) beside softmax(x)) is not called
// with the launcher's arguments: it is named, with why, and left a TODO; one
// with defaults for the rest is used.
TEST(InitCommand, AReferenceIsUsedOnlyWhereItTakesTheLaunchersArguments) {
  const std::string launcher_module =
      "import torch\nimport triton\nimport triton.language as tl\n\n\n"
      "@triton.jit\ndef softmax_kernel(out_ptr, in_ptr, n_cols, BLOCK: tl.constexpr):\n    pass\n\n\n"
      "def softmax(x):\n    y = torch.empty_like(x)\n"
      "    softmax_kernel[(x.shape[0],)](y, x, x.shape[1], BLOCK=1024)\n    return y\n\n\n"
      "x = torch.randn(8, 1024, device='cuda')\ny = softmax(x)\n";
  for (const bool matching : {false, true}) {
    const fs::path repo = kw::testing::make_temp_dir("kw-init-reference-signature");
    write(repo / "softmax.py", launcher_module);
    write(repo / "tests/reference.py", matching
                                           ? "def torch_softmax(x, dim: int = -1, *, dtype=None):\n"
                                             "    return torch.exp(x) / torch.exp(x).sum(dim, keepdim=True)\n"
                                           : "def torch_softmax(x, dim, dtype):\n"
                                             "    return (torch.exp(x) / torch.exp(x).sum(dim)).to(dtype)\n");
    const Inspection found = inspect_repository(repo, {});
    ASSERT_EQ(found.benches.size(), 1u) << json(found.notes).dump();
    const std::string& script = found.script_text;
    if (matching) {
      EXPECT_NE(script.find("return tests.reference.torch_softmax(self.x)"), std::string::npos) << script;
    } else {
      EXPECT_EQ(script.find("torch_softmax(self.x)"), std::string::npos) << script;
      EXPECT_NE(
          script.find("the repository has torch_softmax (tests/reference.py), which takes 3 argument(s) "
                      "where the call passes 1: not used"),
          std::string::npos)
          << script;
    }
    expect_python_compiles(script);
    fs::remove_all(repo);
  }
}

// What real tests look like: an input made by a call spread over lines
// becomes one setup line, and a launcher called with literals alone gets a
// setup that passes; the script compiles either way.
TEST(InitCommand, AnInputMadeOverSeveralLinesIsJoinedAndANoArgumentCallNeedsNoSetup) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-multiline");
  write(repo / "gating.py",
        "import torch\nimport triton\n\n@triton.jit\ndef gating_kernel(x, n):\n    pass\n\n"
        "def gating(x):\n    gating_kernel[(1,)](x, x.numel())\n    return x\n\n"
        "@triton.jit\ndef seed_kernel(n):\n    pass\n\n"
        "def seed(n):\n    seed_kernel[(1,)](n)\n    return n\n");
  write(repo / "tests/test_gating.py",
        "import torch\nfrom gating import gating, seed\n\ndef test_gating():\n"
        "    scores = torch.randn(\n        64, 8,\n        device='cuda',\n    )\n"
        "    gating(scores)\n    seed(7)\n");
  const Inspection found = inspect_repository(repo, {});
  ASSERT_EQ(found.benches.size(), 1u) << json(found.notes).dump();
  const std::string& script = found.script_text;
  EXPECT_NE(script.find("        self.scores = torch.randn( 64, 8, device='cuda', )\n"), std::string::npos)
      << script;
  EXPECT_NE(script.find("        pass  # the call passes no input\n"), std::string::npos) << script;
  expect_python_compiles(script);
  fs::remove_all(repo);
}

// A test parametrized over shapes and dtypes with literal values: each of
// its combinations becomes a case, named by its parameters, with the
// parameters bound before the inputs are made. Parameters the inputs do not
// use (`amp`) and values kw init cannot read (`default_shapes()`) are left
// out.
TEST(InitCommand, AParametrizedTestsShapesBecomeCases) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-triton-parametrized");
  write(repo / "softmax.py",
        "import torch\nimport triton\nimport triton.language as tl\n\n\n"
        "@triton.jit\ndef softmax_kernel(out_ptr, in_ptr, n_cols, BLOCK: tl.constexpr):\n    pass\n\n\n"
        "def softmax(x):\n    n_rows, n_cols = x.shape\n    y = torch.empty_like(x)\n"
        "    softmax_kernel[(n_rows,)](y, x, n_cols, BLOCK=triton.next_power_of_2(n_cols))\n"
        "    return y\n");
  write(repo / "tests/test_softmax.py",
        "import pytest\nimport torch\n\nfrom softmax import softmax\n\n\n"
        "@pytest.mark.parametrize(\"shape\", default_shapes())\n"
        "def test_many(shape):\n    pass\n\n\n"
        "@pytest.mark.parametrize(\n    \"M, N\",\n    [(128, 256), (4096, 1024)],\n)\n"
        "@pytest.mark.parametrize('dtype', [torch.float32, torch.float16])\n"
        "@pytest.mark.parametrize('amp', [False, True])\n"
        "def test_softmax(M, N, dtype, amp):\n"
        "    x = torch.randn(M, N, device='cuda', dtype=dtype)\n"
        "    y = softmax(x)\n"
        "    assert y.shape == x.shape\n");
  const Inspection found = inspect_repository(repo, {});
  ASSERT_EQ(found.benches.size(), 1u) << json(found.notes).dump();
  const std::string& script = found.script_text;
  EXPECT_NE(script.find("the shapes of test_softmax's @pytest.mark.parametrize (tests/test_softmax.py)"),
            std::string::npos)
      << script;
  EXPECT_NE(script.find("        M = self.params[\"M\"]\n        N = self.params[\"N\"]\n"
                        "        dtype = self.params[\"dtype\"]\n"
                        "        self.x = torch.randn(M, N, device='cuda', dtype=dtype)\n"),
            std::string::npos)
      << script;
  EXPECT_NE(script.find("kwbench.main([SoftmaxKernel(M=128, N=256, dtype=torch.float32), "
                        "SoftmaxKernel(M=128, N=256, dtype=torch.float16), "
                        "SoftmaxKernel(M=4096, N=1024, dtype=torch.float32), "
                        "SoftmaxKernel(M=4096, N=1024, dtype=torch.float16)]"),
            std::string::npos)
      << script;
  EXPECT_EQ(script.find("amp"), std::string::npos) << "the inputs do not use it\n" << script;
  EXPECT_EQ(script.find("TODO: name the shape"), std::string::npos) << script;
  EXPECT_EQ(script.find("TODO: make the inputs"), std::string::npos) << script;
  expect_python_compiles(script);
  parse_repo_config(repo_config_of(found));
  fs::remove_all(repo);
}

// pytorch/extension-cpp's shape: the module named through an f-string, ops
// registered with TORCH_LIBRARY schemas, one kernel per op.
TEST(InitCommand, ATorchLibraryExtensionIsCalledThroughTorchOps) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-torch-library");
  write(repo / "setup.py",
        "from torch.utils.cpp_extension import CppExtension, CUDAExtension, BuildExtension\n"
        "library_name = \"extension_cpp\"\n"
        "def get_extensions():\n    extension = CUDAExtension\n"
        "    return [extension(f\"{library_name}._C\", sources)]\n");
  write(repo / "extension_cpp/csrc/muladd.cpp",
        "TORCH_LIBRARY(extension_cpp, m) {\n  m.def(\"mymuladd(Tensor a, Tensor b, float c) -> Tensor\");\n"
        "  m.def(\"mymul(Tensor a, Tensor b) -> Tensor\");\n}\n");
  write(repo / "extension_cpp/csrc/cuda/muladd.cu",
        "__global__ void muladd_kernel(int n, const float* a) {}\n"
        "__global__ void mul_kernel(int n, const float* a) {}\n");
  const Inspection found = inspect_repository(repo, {});
  ASSERT_EQ(found.benches.size(), 1u) << json(found.notes).dump();
  EXPECT_NE(found.script_text.find("import extension_cpp._C"), std::string::npos) << found.script_text;
  EXPECT_NE(found.script_text.find("return torch.ops.extension_cpp.mymuladd()  # TODO"), std::string::npos);
  EXPECT_NE(found.script_text.find("class Mymul(kwbench.Case)"), std::string::npos);
  EXPECT_NE(found.script_text.find("kwbench.Launch(\"*mul_kernel*\""), std::string::npos)
      << "mymul launches mul_kernel, not muladd_kernel";
  expect_python_compiles(found.script_text);

  const Inspection one = inspect_repository(repo, only({"mymuladd"}));
  EXPECT_EQ(one.script_text.find("class Mymul("), std::string::npos);
  EXPECT_NE(one.script_text.find("class Mymuladd("), std::string::npos);
  fs::remove_all(repo);
}

TEST(InitCommand, OnlyTritonFunctionsLaunchedAsKernelsBecomeCases) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-triton-launched");
  write(repo / "lib/softmax_kernels.py",
        "import triton\nimport triton.language as tl\n\n"
        "@triton.jit\ndef row_max(x):\n    return tl.max(x)\n\n"
        "@triton.autotune(\n    configs=configs(),\n    key=['n'],\n)\n"
        "@triton.heuristics({'BLOCK': lambda args: 64,\n                    'ROWS': lambda args: 1})\n"
        "@triton.jit\ndef softmax_forward_kernel(x, n):\n    pass\n");
  write(repo / "lib/softmax_layer.py",
        "from .softmax_kernels import softmax_forward_kernel\n"
        "def softmax(x):\n    softmax_forward_kernel[grid](x, x.numel())\n");
  const Inspection found = inspect_repository(repo, {});
  ASSERT_EQ(found.benches.size(), 1u) << json(found.notes).dump();
  EXPECT_NE(found.script_text.find("class SoftmaxForwardKernel(kwbench.Case)"), std::string::npos);
  EXPECT_EQ(found.script_text.find("RowMax"), std::string::npos) << "a helper is no case";
  ASSERT_FALSE(found.notes.empty());
  EXPECT_NE(found.notes[0].find("2 @triton.jit function(s), 1 launched as kernels"), std::string::npos)
      << found.notes[0];
  expect_python_compiles(found.script_text);
  fs::remove_all(repo);
}

// kakaobrain/trident's layout: each benchmark script declares perf_report
// benchmarks through a wrapper of a sibling module (util.report), runs
// nothing itself (a runner calls each module's run_benchmark), and imports
// the package, whose kernels are static methods under @triton.jit. The
// scripts are tracked as perf_report, the wrapper's module is none, and the
// package's kernels are covered: no skeleton.
TEST(InitCommand, PerfReportThroughAWrapperIsTrackedAndThePackageItImportsIsCovered) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-perf-report-wrapper");
  write(repo / "benchmarks/util.py",
        "import triton\n\n\ndef make_benchmark(title, x_names, x_vals, args):\n"
        "    return triton.testing.Benchmark(x_names, x_vals, 'backend', ['torch', 'trident'],\n"
        "                                    ['torch', 'trident'], title, args)\n\n\n"
        "def report(title, x_names, x_vals, args=None):\n    if args is None:\n        args = {}\n"
        "    return triton.testing.perf_report([make_benchmark(title, x_names, x_vals, args)])\n");
  write(repo / "benchmarks/benchmark_softmax.py",
        "import torch\nimport triton\nimport util\n\nimport trident\n\n\n"
        "@util.report(\"softmax forward\", [\"x_size\"], [128 * i for i in range(1, 21)], {\"y_size\": 16})\n"
        "def bench_softmax_forward(y_size, x_size, dtype, backend):\n"
        "    x = torch.randn(y_size, x_size, device='cuda', dtype=dtype)\n"
        "    if backend == 'torch':\n"
        "        return triton.testing.do_bench_cudagraph(lambda: torch.softmax(x, 1))\n"
        "    return triton.testing.do_bench_cudagraph(lambda: trident.function.softmax(x, 1))\n\n\n"
        "def run_benchmark(mode, show_plots, dtype):\n"
        "    bench_softmax_forward.run(print_data=True, show_plots=show_plots, dtype=dtype)\n");
  write(repo / "benchmarks/benchmarker.py",
        "import benchmark_softmax\n\nif __name__ == '__main__':\n"
        "    benchmark_softmax.run_benchmark('forward', False, None)\n");
  write(repo / "trident/__init__.py", "from . import function, kernel\n");
  write(repo / "trident/function/__init__.py", "from .function import *\n");
  write(repo / "trident/function/function.py",
        "from trident import kernel\n\n\ndef softmax(x, dim):\n"
        "    y = x.new_empty(x.shape)\n    kernel.Softmax.forward[(x.shape[0],)](y, x, x.shape[1])\n"
        "    return y\n");
  write(repo / "trident/kernel/__init__.py", "from .softmax import *\n");
  write(repo / "trident/kernel/softmax.py",
        "import triton\nimport triton.language as tl\n\nfrom trident import language\n\n\n"
        "class Softmax:\n    @staticmethod\n    @triton.heuristics({'boundary': lambda args: True})\n"
        "    @triton.jit\n    def forward(output_ptr, input_ptr, x_size):\n"
        "        m, s = tl.reduce((x, x), 1, language.combine_softmax)\n");
  write(repo / "trident/language/__init__.py", "from .combine import *\n");
  write(repo / "trident/language/combine.py",
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def combine_softmax(max_a, sum_a, max_b, sum_b):\n    return max_a, sum_a\n");
  // trident's requirements name nvtx, which a GPU host without it fails to import at load.
  write(repo / "requirements.txt",
        "# benchmarks\nkw-absent-distribution>=1.0  # profiling ranges\n-r dev.txt\n");
  const Inspection found = inspect_repository(repo, {});
  ASSERT_EQ(found.benches.size(), 1u) << json(found.benches.size()).dump() << json(found.notes).dump();
  ASSERT_EQ(found.todos.size(), 2u) << json(found.todos).dump();
  // dtype comes from the runner's .run(); backend is the wrapper's line_arg, y_size and x_size the
  // benchmark's.
  EXPECT_EQ(found.todos[0].find(
                "the perf_report functions take dtype (1 script(s) at least), which their benchmarks do "
                "not give"),
            0u)
      << found.todos[0];
  EXPECT_NE(found.todos[0].find("\"run_args\": {\"dtype\": \"...\"}"), std::string::npos) << found.todos[0];
  EXPECT_EQ(found.todos[1].find("requirements.txt names kw-absent-distribution, which python3 here does not "
                                "have installed"),
            0u)
      << found.todos[1];
  EXPECT_EQ(found.benches[0].name, "benchmark_softmax");
  EXPECT_EQ(found.benches[0].format, "perf_report");
  EXPECT_TRUE(found.script_text.empty()) << "`import trident` covers the package's kernels:\n"
                                         << found.script_text;
  ASSERT_FALSE(found.notes.empty());
  EXPECT_NE(found.notes[0].find("Triton: 1 benchmark script(s)"), std::string::npos) << found.notes[0];

  // Without the benchmarks, the static method is the kernel and the helper
  // that tl.reduce combines with is none.
  fs::remove_all(repo / "benchmarks");
  const Inspection kernels = inspect_repository(repo, {});
  EXPECT_NE(kernels.script_text.find("class Forward(kwbench.Case)"), std::string::npos)
      << kernels.script_text;
  EXPECT_EQ(kernels.script_text.find("CombineSoftmax"), std::string::npos) << kernels.script_text;
  fs::remove_all(repo);
}

// A module of helpers that call do_bench (FlagGems' benchmark/performance_utils.py,
// which its pytest benchmarks import) is no script to run, and a docstring
// at a module's top level ("Note(someone):") runs nothing when imported.
TEST(InitCommand, AHelperModuleCallingDoBenchIsNoScriptAndADocstringRunsNothing) {
  const fs::path repo = kw::testing::make_temp_dir("kw-init-do-bench-helper");
  write(repo / "benchmark/performance_utils.py",
        "import triton\n\ndevice = 'cuda'\nif device == 'musa':\n    device = 'musa'\n\n\n"
        "class Benchmark:\n    def run(self, fn):\n        return triton.testing.do_bench(fn)\n");
  write(repo / "lib/scale.py",
        "import triton\nimport triton.language as tl\n\n\n\"\"\"\nNote(someone):\nfrom upstream's "
        "sort.\n\"\"\"\n\n\n"
        "@triton.jit\ndef scale_kernel(x, n):\n    pass\n\n\ndef scale(x):\n    scale_kernel[(1,)](x, "
        "x.numel())\n"
        "    return x  # keep(this)\n");
  const Inspection found = inspect_repository(repo, {});
  ASSERT_EQ(found.benches.size(), 1u) << json(found.notes).dump();
  EXPECT_EQ(found.benches[0].format, "python");
  for (const std::string& todo : found.todos) EXPECT_EQ(todo.find("Note("), std::string::npos) << todo;
  expect_python_compiles(found.script_text);
  fs::remove_all(repo);
}

}  // namespace
}  // namespace kw::agent
