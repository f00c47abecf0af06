// What a repository's own Python says about a Triton kernel's case, for the
// bench script kw init writes: the launcher function that calls the kernel
// and the arguments a test or benchmark of the repository passes it (their
// values, where that file builds them from torch alone, become the case's
// inputs), the block its num_warps makes, a reference function it already
// has (naive_*, *_ref, torch_*), and module code that runs at import. Where
// the calling test is parametrized (@pytest.mark.parametrize with literal
// values) over names its inputs use, each of its shapes is a case.
// Regular expressions over the text, not a Python parser: each finding is a
// suggestion the generated script states as such.
#pragma once

#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace kw::agent {

// A Python file of the repository: its path in the repository, its module
// name (kernels/softmax.py -> kernels.softmax) and its text.
struct PythonFile {
  std::string path, module, text;
  std::string code;  // `text` as code_only() gives it: what its strings and comments hold blanked
  // The folder its module is imported from, relative to the repository:
  // empty, or a src layout's `src` (a package whose folder's parent is no
  // package).
  std::string import_root;
};

struct CaseHints {
  std::string call;                // the candidate's call, e.g. kernels.softmax.softmax(self.x)
  std::string call_note;           // where the arguments come from
  std::vector<std::string> setup;  // lines of setup(), e.g. self.x = torch.randn(...)
  bool setup_complete = false;     // every input is made: no TODO left in setup()
  std::string block = "(128, 1, 1)";
  std::string block_note;
  std::string reference;  // an expression of the expected output, or empty
  std::string reference_note;
  std::vector<std::string> modules;  // what the script must import for these
  // The caller's @pytest.mark.parametrize names its inputs use, and their
  // values, a row a case (Python literals); none: one case.
  std::vector<std::string> param_names;
  std::vector<std::vector<std::string>> param_rows;
  std::string params_note;  // where they come from
};

// What @pytest.mark.parametrize decorators give the top-level function of
// `text` that contains `offset`: the names, and every combination of their
// literal values (at most `limit`). A decorator whose values are not
// literals (a function's result) is left out, its names with it.
struct Parametrized {
  std::vector<std::string> names;
  std::vector<std::vector<std::string>> rows;
  std::string function;  // the test's name
};
Parametrized parametrized_at(const std::string& text, std::size_t offset, std::size_t limit);

// The hints for `kernel`, a @triton.jit function of `file`.
CaseHints triton_case_hints(const PythonFile& file, const std::string& kernel,
                            const std::vector<PythonFile>& files);

// The identifiers a Python expression reads, in order, less attribute
// names and keyword arguments' names; what its strings hold is left out.
std::vector<std::string> free_identifiers(const std::string& expression);

// A function of the repository that computes what a kernel or bound
// function does another way: naive_*, ref_*/reference_*, *_ref/*_reference
// or torch_*, whose name less that affix is part of `stem` (or `stem` part
// of it); nullopt where there is none.
std::optional<std::pair<const PythonFile*, std::string>> reference_of(const std::string& stem,
                                                                      const std::vector<PythonFile>& files);

// `text` with what its strings and comments hold blanked, newlines kept:
// offsets still match, and a docstring's "Note(x):" is no call.
std::string code_only(const std::string& text);

// The top-level functions that return a perf_report decorator (`return
// triton.testing.perf_report([...])`: kakaobrain/trident's util.report).
std::set<std::string> perf_report_wrappers(const std::vector<PythonFile>& files);
// Whether importing `file` declares perf_report benchmarks: a perf_report
// call of its own (not a wrapper's return), or a decorator that is one of
// `wrappers`.
bool declares_perf_report(const PythonFile& file, const std::set<std::string>& wrappers);
// What kw init says of the parameters of the `scripts`' perf_report
// benchmark functions that have no default and that no string of the
// script or of the wrappers' modules names (an x name, an arg, a
// line_arg): those only a runner's `.run(NAME=...)` gives (trident's
// dtype), which kernelwatch.json's run_args must give instead; "" where
// there are none.
std::string run_args_todo(const std::vector<const PythonFile*>& scripts, const std::vector<PythonFile>& files,
                          const std::set<std::string>& wrappers);

// Whether running `file` does anything: a `__main__` block, a loop, or a
// call at its top level. A helper module of functions does not.
bool runs_as_script(const PythonFile& file);

// "FILE:LINE runs `CALL`" for each statement at a module's top level that
// calls something when the module is imported (a test, a benchmark sweep).
std::vector<std::string> import_side_effects(const PythonFile& file);

// `text` as a Python identifier: other characters become '_', a leading
// digit gets one before it.
std::string identifier(std::string text);
// A function's name as a class name: softmax_kernel is SoftmaxKernel.
std::string class_name(const std::string& function);
// Each kernel's case class and case name. Kernels of one name in several
// modules (_fwd_kernel) are told apart by their module, in both; names that
// differ only where a class name drops it (_fwd, fwd) get a number.
std::vector<std::pair<std::string, std::string>> case_names(
    const std::vector<std::pair<const PythonFile*, std::string>>& kernels);

}  // namespace kw::agent
