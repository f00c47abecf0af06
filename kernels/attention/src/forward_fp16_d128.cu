// Instantiations for head dim 128, fp16: causal and not.
#include "launch.cuh"

namespace kw::attention {
KW_ATTENTION_INSTANTIATIONS(, 128, __half)
}  // namespace kw::attention
