#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention (flash and cuDNN backends) at the
shapes of kw-bench-attention, timed like kwbench's full_bench: CUDA events
around one call, L2 flushed before each sample, median of the samples.

  python3 kernels/attention/tools/sdpa_pytorch.py --out sdpa.json [--quick]
"""
import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def shapes():
    for dtype in ("fp16", "bf16"):
        for causal in (False, True):
            for seqlen in (32, 64, 128, 256, 512):
                yield "user", dtype, 1, 1, seqlen, 64, causal
            yield "user", dtype, 2, 4, 128, 64, causal
            for head_dim in (64, 128):
                seqlen = 512
                while seqlen <= 16384:
                    yield "flash-attention", dtype, 16384 // seqlen, 2048 // head_dim, seqlen, head_dim, causal
                    seqlen *= 2


def case_name(dtype, batch, heads, seqlen, head_dim, causal):
    return f"attention/{dtype}/d{head_dim}/b{batch}h{heads}s{seqlen}" + ("/causal" if causal else "")


def time_call(fn, flush, samples):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(samples):
        flush.zero_()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e6)  # ns
    return times


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--samples", type=int, default=30)
    args = parser.parse_args()
    props = torch.cuda.get_device_properties(0)
    flush = torch.empty(2 * props.L2_cache_size, dtype=torch.uint8, device="cuda")
    backends = {"torch_flash": SDPBackend.FLASH_ATTENTION, "torch_cudnn": SDPBackend.CUDNN_ATTENTION}
    results = {"device": props.name, "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), "cases": {}}
    for group, dtype, batch, heads, seqlen, head_dim, causal in shapes():
        torch_dtype = torch.float16 if dtype == "fp16" else torch.bfloat16
        gen = torch.Generator(device="cuda").manual_seed(seqlen * 131 + head_dim)
        q, k, v = (torch.randn(batch, heads, seqlen, head_dim, device="cuda", dtype=torch_dtype, generator=gen)
                   for _ in range(3))
        flops = 4.0 * batch * heads * seqlen * seqlen * head_dim / (2 if causal else 1)
        entry = {}
        for label, backend in backends.items():
            try:
                with sdpa_kernel(backend):
                    times = time_call(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), flush,
                                      args.samples)
                median = statistics.median(times)
                entry[label] = {"median_ns": median, "tflops": flops / median / 1e3, "samples": len(times)}
            except RuntimeError as error:
                entry[label] = {"unavailable": str(error).splitlines()[0][:200]}
        name = case_name(dtype, batch, heads, seqlen, head_dim, causal)
        results["cases"][name] = entry
        summary = "  ".join(f"{k} {v['median_ns'] / 1e3:9.1f} us {v['tflops']:6.1f} TF/s" if "median_ns" in v
                            else f"{k} unavailable" for k, v in entry.items())
        print(f"{name:44s} {summary}", flush=True)
        del q, k, v
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
