"""The changes tools/fingerprint-series.sh commits over its base, one per
kind, applied to the checkout in the current directory:
  docs    a README line: nothing any case runs
  kernel  a fence at the start of the fp16 head-dim-64 attention kernels
          only (their translation unit defines the switch; the shared
          kernel template reads it): device code, no host code
  flags   --use_fast_math for every attention kernel: a build flag
  host    an injected 5% slowdown of the D=128 S=4096 cases: the bench's
          own (host) code
Exits non-zero when the change could not be made."""
import re
import sys


def edit(path, old, new, count=1):
    with open(path) as f:
        text = f.read()
    if old not in text:
        sys.exit("%s: %r not found" % (path, old))
    with open(path, "w") as f:
        f.write(text.replace(old, new, count))


def kernel():
    edit("kernels/attention/src/forward_fp16_d64.cu", '#include "launch.cuh"',
         '#define KW_ATTENTION_ENTRY_FENCE 1\n#include "launch.cuh"')
    path = "kernels/attention/src/forward_kernel.cuh"
    with open(path) as f:
        text = f.read()
    match = re.search(r"attention_forward_kernel\(const ForwardParams params\) \{\n", text)
    if not match:
        sys.exit("%s: the kernel's opening line not found" % path)
    text = (text[:match.end()] + "#if KW_ATTENTION_ENTRY_FENCE\n  __threadfence_block();\n#endif\n" +
            text[match.end():])
    with open(path, "w") as f:
        f.write("#ifndef KW_ATTENTION_ENTRY_FENCE\n#define KW_ATTENTION_ENTRY_FENCE 0\n#endif\n" + text)


def main():
    kind = sys.argv[1]
    if kind == "docs":
        with open("README.md", "a") as f:
            f.write("<!-- a documentation change -->\n")
    elif kind == "kernel":
        kernel()
    elif kind == "flags":
        with open("kernels/attention/CMakeLists.txt", "a") as f:
            for target in ("kw_attention_objects", "kw_attention"):
                f.write("target_compile_options(%s PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:--use_fast_math>)\n" % target)
    elif kind == "host":
        edit("kernels/attention/bench/injected_slowdown.hpp", 'kInjectedSlowdown = ""',
             'kInjectedSlowdown = "attention/*/d128/*s4096*=0.05"')
    else:
        sys.exit("unknown kind " + kind)


if __name__ == "__main__":
    main()
