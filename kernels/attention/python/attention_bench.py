#!/usr/bin/env python3
"""The attention kernel measured from PyTorch (kernels/python/kwbench.py):
this repository's kernel through ctypes (kw_attention_torch.py) against
torch's scaled_dot_product_attention, which picks its own fused kernel
(FlashAttention-2 or memory-efficient) for the shape.

Correctness compares with torch's SDPA in float32 on the same inputs: other
code than the kernel's, a batch at a time so no S x S matrix of the whole
case is held. The launch each case must make is written out below, as
../bench/expected_launches.hpp does for the C++ bench.
"""
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "python"))
import kwbench  # noqa: E402

# A kernel variant as the launch shows it: head dim, the tile sizes of its
# template arguments, threads, and the dynamic shared memory it asks for.
SHORT_D64 = (64, 16, 64, 128, 16 * 128 + 2 * 512 * 128)
STREAMING_D64 = (64, 128, 64, 128, 128 * 128 + 2 * 64 * 128)
STREAMING_D128 = (128, 128, 64, 128, 128 * 256 + 2 * 64 * 256)

# First match wins; the same rules as ../bench/expected_launches.hpp.
RULES = [
    ("attention/*/d64/b1h1s*", SHORT_D64),
    ("attention/*/d64/*", STREAMING_D64),
    ("attention/*/d128/*", STREAMING_D128),
]


class AttentionCase(kwbench.Case):
    def __init__(self, group, batch, heads, seqlen, head_dim, causal, dtype):
        self.batch, self.heads, self.seqlen, self.head_dim = batch, heads, seqlen, head_dim
        self.causal, self.dtype = causal, dtype
        self.name = "attention/%s/d%d/b%dh%ds%d%s" % (dtype, head_dim, batch, heads, seqlen,
                                                     "/causal" if causal else "")
        self.params = {"group": group, "dtype": dtype, "batch": batch, "heads": heads, "seqlen_q": seqlen,
                       "seqlen_k": seqlen, "head_dim": head_dim, "causal": causal, "layout": "bhsd",
                       "harness": "python"}

    def setup(self, state):
        import kw_attention_torch  # noqa: PLC0415 (imported by the load stage first)

        torch = state.torch
        self.kernel = kw_attention_torch
        self.torch = torch
        dtype = torch.float16 if self.dtype == "fp16" else torch.bfloat16
        generator = torch.Generator(device="cuda").manual_seed(state.seed)
        shape = (self.batch, self.heads, self.seqlen, self.head_dim)
        self.q, self.k, self.v = (torch.randn(shape, device="cuda", dtype=dtype, generator=generator)
                                  for _ in range(3))
        self.o = torch.empty_like(self.q)

    def teardown(self, state):
        self.q = self.k = self.v = self.o = None

    def run_candidate(self, state):
        self.kernel.forward(self.q, self.k, self.v, self.causal, out=self.o)

    def baselines(self):
        return ["torch_sdpa"]

    def run_baseline(self, name, state):
        self.torch.nn.functional.scaled_dot_product_attention(self.q, self.k, self.v, is_causal=self.causal)

    def output(self, state):
        return self.o

    def reference(self, state):
        sdpa = self.torch.nn.functional.scaled_dot_product_attention
        return self.torch.cat([sdpa(self.q[b:b + 1].float(), self.k[b:b + 1].float(), self.v[b:b + 1].float(),
                                    is_causal=self.causal) for b in range(self.batch)])

    def tolerance(self):
        return 2e-3 if self.dtype == "fp16" else 1e-2

    def expected_launch(self):
        for glob, (head_dim, block_m, block_n, threads, smem) in RULES:
            if not kwbench.fnmatch.fnmatchcase(self.name, glob):
                continue
            demangled = "__half" if self.dtype == "fp16" else "__nv_bfloat16"
            return kwbench.Launch(
                "void kw::attention::attention_forward_kernel<kw::attention::ForwardTraits<%d, %d, %d, *>, %s, %s>*"
                % (head_dim, block_m, block_n, demangled, "true" if self.causal else "false"),
                block=(threads, 1, 1), grid=(math.ceil(self.seqlen / block_m), self.heads, self.batch),
                max_registers=255, max_shared_bytes=smem)
        raise kwbench.Error("no expected launch for " + self.name)

    def sanity(self):
        return kwbench.Sanity("torch_sdpa", 0.25, 8.0)

    def flops(self):
        full = 4.0 * self.batch * self.heads * self.seqlen * self.seqlen * self.head_dim
        return full / 2 if self.causal else full


def cases():
    out = []
    for dtype in ("fp16", "bf16"):
        for causal in (False, True):
            for seqlen in (128, 512):
                out.append(AttentionCase("user", 1, 1, seqlen, 64, causal, dtype))
            for head_dim, seqlen in ((64, 1024), (64, 4096), (128, 2048)):
                out.append(AttentionCase("flash-attention", 16384 // seqlen, 2048 // head_dim, seqlen, head_dim,
                                         causal, dtype))
    return out


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
    sys.exit(kwbench.main(cases(), modules=["kw_attention_torch"]))
