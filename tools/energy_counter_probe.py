#!/usr/bin/env python3
"""On the GPU machine: how NVML's total-energy counter steps (its update
period and step size), idle and under load, read through ctypes as the
harness reads it. What full_bench.energy_seconds must cover (docs/PERFORMANCE.md).

  energy_counter_probe.py [--seconds 2] [--json OUT]
"""
import argparse
import ctypes
import json
import threading
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--json")
    args = parser.parse_args()
    nvml = ctypes.CDLL("libnvidia-ml.so.1")
    if nvml.nvmlInit_v2() != 0:
        raise SystemExit("nvmlInit_v2 failed")
    device = ctypes.c_void_p()
    if nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(device)) != 0:
        raise SystemExit("nvmlDeviceGetHandleByIndex_v2 failed")
    value = ctypes.c_ulonglong()

    def read():
        status = nvml.nvmlDeviceGetTotalEnergyConsumption(device, ctypes.byref(value))
        if status != 0:
            raise SystemExit(f"nvmlDeviceGetTotalEnergyConsumption failed: {status}")
        return value.value

    def steps(seconds):
        began = time.perf_counter()
        last = read()
        seen = []
        reads = 0
        while time.perf_counter() - began < seconds:
            now = read()
            reads += 1
            if now != last:
                seen.append((time.perf_counter() - began, now - last))
                last = now
        periods = [b[0] - a[0] for a, b in zip(seen, seen[1:])]
        periods.sort()
        return {
            "reads": reads,
            "read_us": 1e6 * seconds / max(reads, 1),
            "steps": len(seen),
            "period_ms_median": 1e3 * periods[len(periods) // 2] if periods else None,
            "period_ms_max": 1e3 * max(periods) if periods else None,
            "step_mj_median": sorted(s for _, s in seen)[len(seen) // 2] if seen else None,
            "watts": sum(s for _, s in seen) / 1000 / (seen[-1][0] - seen[0][0]) if len(seen) > 1 else None,
        }

    result = {"idle": steps(args.seconds)}
    try:
        import torch

        stop = threading.Event()
        a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)

        def load():
            while not stop.is_set():
                for _ in range(20):
                    a @ a
                torch.cuda.synchronize()

        worker = threading.Thread(target=load)
        worker.start()
        time.sleep(0.5)
        result["matmul_load"] = steps(args.seconds)
        stop.set()
        worker.join()
    except ImportError:
        result["matmul_load"] = "no torch"
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
