#!/usr/bin/env python3
"""The PERFORMANCE.md table: kw-bench-attention's full_bench JSON (our kernel,
cuDNN SDPA, cuBLAS unfused, same run) joined with sdpa_pytorch.py's JSON
(PyTorch flash and cuDNN backends, same device).

  attention_table.py FULL_BENCH.json [SDPA.json]
"""
import json
import sys


def main(bench_path, torch_path=None):
    bench = json.load(open(bench_path))
    torch_cases = json.load(open(torch_path))["cases"] if torch_path else {}
    device = bench.get("device", {})
    print(f"device: {device.get('name', '?')}, driver {device.get('driver', '?')}, "
          f"CUDA runtime {device.get('cuda_runtime', '?')}")
    print()
    print("| case | ours (us) | TFLOP/s | noise | vs cuDNN SDPA | vs cuBLAS unfused | vs torch flash | vs torch cuDNN |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for case in bench["cases"]:
        m = {x["impl"]: x for x in case.get("measurements", [])}
        if "candidate" not in m:
            continue
        ours = m["candidate"]["median_ns"]
        flops = m["candidate"].get("flops", 0)
        samples = sorted(m["candidate"]["samples_ns"])
        q1, q3 = samples[len(samples) // 4], samples[(3 * len(samples)) // 4]
        noise = (q3 - q1) / ours if ours else 0

        def ratio(ns):
            return f"{ns / ours:.2f}x" if ns else "n/a"

        cudnn = m.get("baseline:cudnn", {}).get("median_ns")
        cublas = m.get("baseline:cublas_unfused", {}).get("median_ns")
        t = torch_cases.get(case["name"], {})
        flash = t.get("torch_flash", {}).get("median_ns")
        tcudnn = t.get("torch_cudnn", {}).get("median_ns")
        print(f"| {case['name']} | {ours / 1e3:.1f} | {flops / ours / 1e3:.0f} | {100 * noise:.1f}% | "
              f"{ratio(cudnn)} | {ratio(cublas)} | {ratio(flash)} | {ratio(tcudnn)} |")


if __name__ == "__main__":
    main(*sys.argv[1:])
