"""This repository's attention kernel for PyTorch tensors, through ctypes:
`forward(q, k, v, causal)` on contiguous [B, H, S, D] fp16 or bf16 CUDA
tensors, launched on torch's current stream.

The library is KW_ATTENTION_LIBRARY, else libkw_attention.so of the first
build tree found (build/gpu, build/release, build/dev, build/ci). Importing
this module loads it: a library with an unresolved symbol fails the import.
"""
import ctypes
import math
import os

import torch

_ROOT = os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "..")


def _library_path():
    path = os.environ.get("KW_ATTENTION_LIBRARY")
    if path:
        return path
    for tree in ("gpu", "release", "dev", "ci"):
        candidate = os.path.join(_ROOT, "build", tree, "kernels", "attention", "libkw_attention.so")
        if os.path.exists(candidate):
            return os.path.realpath(candidate)
    raise ImportError("libkw_attention.so not found: build kernels/attention or set KW_ATTENTION_LIBRARY")


LIBRARY_PATH = _library_path()
_lib = ctypes.CDLL(LIBRARY_PATH, mode=os.RTLD_NOW)
_forward = _lib.kw_attention_forward_bhsd
_forward.argtypes = [ctypes.c_int] * 6 + [ctypes.c_void_p] * 5 + [ctypes.c_float, ctypes.c_int, ctypes.c_void_p,
                                                                    ctypes.c_char_p, ctypes.c_size_t]
_forward.restype = ctypes.c_int
_DTYPES = {torch.float16: 0, torch.bfloat16: 1}


def forward(q, k, v, causal=False, out=None, lse=None, scale=None):
    """softmax(scale * q k^T) v, written to `out` (allocated when None);
    `lse`, a float32 [B, H, Sq] tensor, gets the log-sum-exp of each row."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not t.is_cuda or not t.is_contiguous() or t.dim() != 4:
            raise ValueError("%s must be a contiguous [B, H, S, D] CUDA tensor" % name)
        if t.dtype not in _DTYPES or t.dtype != q.dtype:
            raise ValueError("%s must be fp16 or bf16, as q" % name)
    batch, heads, seqlen_q, head_dim = q.shape
    seqlen_k = k.shape[2]
    if out is None:
        out = torch.empty_like(q)
    error = ctypes.create_string_buffer(512)
    status = _forward(_DTYPES[q.dtype], batch, heads, seqlen_q, seqlen_k, head_dim, q.data_ptr(), k.data_ptr(),
                      v.data_ptr(), out.data_ptr(), None if lse is None else lse.data_ptr(),
                      scale if scale is not None else 1.0 / math.sqrt(head_dim), int(causal),
                      torch.cuda.current_stream().cuda_stream, error, len(error))
    if status != 0:
        raise RuntimeError(error.value.decode(errors="replace"))
    return out
