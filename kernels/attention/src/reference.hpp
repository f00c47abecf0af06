// References for correctness: an fp32 GPU kernel that computes selected query
// rows one block per row, plainly (scores in shared memory, two-pass softmax),
// and an fp64 CPU version used to check that kernel on small shapes.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "kw_attention/attention.hpp"

namespace kw::attention {

// Largest key count the GPU reference holds in shared memory.
int reference_max_seqlen_k();

// Rows are flat indices (b * heads + h) * seqlen_q + i, on the device. Writes
// out[r * head_dim + d] and lse[r] (natural log) for each row r.
void reference_rows(const ForwardParams& params, const std::int64_t* rows, int row_count, float* out,
                    float* lse, cudaStream_t stream);

// How far the kernel's output is from the reference at the checked rows,
// and how many values it left non-finite anywhere.
struct OutputErrors {
  // Over the checked rows' finite values: squared errors and squared
  // reference values of O and of the LSE, and the largest error of O.
  double error_sq = 0, norm_sq = 0, lse_error_sq = 0, lse_norm_sq = 0, max_abs = 0;
  std::uint64_t nonfinite = 0;  // NaN/Inf over every value of O and the LSE
};

// Compares params.o and params.lse (contiguous: [rows, head_dim] and [rows])
// with reference_rows' output for the same rows, on the device: only the
// sums come back to the host.
OutputErrors compare_rows(const ForwardParams& params, const std::int64_t* rows, int row_count,
                          const float* expected, const float* expected_lse, cudaStream_t stream);

// fp64 on the host over inputs already converted to double, [B, H, S, D]
// contiguous. Returns out [B*H*Sq, D]; fills lse [B*H*Sq].
std::vector<double> reference_cpu(const std::vector<double>& q, const std::vector<double>& k,
                                  const std::vector<double>& v, int batch, int heads, int seqlen_q,
                                  int seqlen_k, int head_dim, double scale, bool causal,
                                  std::vector<double>& lse);

// Fills a device buffer of fp16 or bf16 with values uniform in [-range, range]
// from a counter-based generator (seed, index).
void fill_random(DType dtype, void* data, std::size_t count, float range, std::uint64_t seed,
                 cudaStream_t stream);

// Device buffer of fp16/bf16 -> host doubles.
std::vector<double> to_host_double(DType dtype, const void* data, std::size_t count);

}  // namespace kw::attention
