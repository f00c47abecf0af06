#include "cudnn_sdpa.hpp"

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#if KW_HAVE_CUDNN
#include <cudnn.h>
#endif

namespace kw::attention {

#if KW_HAVE_CUDNN

namespace {

class CudnnError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void check(cudnnStatus_t status, const std::string& what) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof(detail));
  throw CudnnError(what + ": " + cudnnGetErrorString(status) +
                   (detail[0] ? std::string(" (") + detail + ")" : ""));
}

// One backend descriptor; destroyed with the plan that owns it.
struct Descriptor {
  cudnnBackendDescriptor_t raw = nullptr;
  explicit Descriptor(cudnnBackendDescriptorType_t type, const char* what) {
    check(cudnnBackendCreateDescriptor(type, &raw), std::string("create ") + what);
  }
  ~Descriptor() {
    if (raw != nullptr) cudnnBackendDestroyDescriptor(raw);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;

  template <typename V>
  Descriptor& set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, const V* values,
                  std::int64_t count = 1) {
    check(cudnnBackendSetAttribute(raw, name, type, count, values),
          "set attribute " + std::to_string(static_cast<int>(name)));
    return *this;
  }
  Descriptor& set_desc(cudnnBackendAttributeName_t name, const Descriptor& other) {
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &other.raw);
  }
  // Not const: finalizing changes the descriptor cuDNN holds behind `raw`.
  void finalize(const std::string& what) {  // NOLINT(readability-make-member-function-const)
    check(cudnnBackendFinalize(raw), "finalize " + what);
  }
};

}  // namespace

struct CudnnSdpa::Plan {
  cudnnHandle_t handle = nullptr;
  std::vector<std::unique_ptr<Descriptor>> owned;
  Descriptor* plan = nullptr;
  std::unique_ptr<Descriptor> variant_pack;
  std::int64_t workspace = 0;
  float scale = 0;
  float lowest = std::numeric_limits<float>::lowest();
  std::vector<std::int64_t> uids;
  std::vector<void*> pointers;

  ~Plan() {
    variant_pack.reset();
    owned.clear();
    if (handle != nullptr) cudnnDestroy(handle);
  }

  Descriptor& make(cudnnBackendDescriptorType_t type, const char* what) {
    owned.push_back(std::make_unique<Descriptor>(type, what));
    return *owned.back();
  }

  Descriptor& tensor(std::int64_t uid, cudnnDataType_t type, std::vector<std::int64_t> dims,
                     std::vector<std::int64_t> strides, bool is_virtual, bool by_value = false) {
    Descriptor& t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor");
    const std::int64_t alignment = 16;
    t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type)
        .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(),
             static_cast<std::int64_t>(dims.size()))
        .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(),
             static_cast<std::int64_t>(strides.size()))
        .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid)
        .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment)
        .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &is_virtual);
    if (by_value) t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &by_value);
    t.finalize("tensor " + std::to_string(uid));
    return t;
  }

  Descriptor& pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t precision, const Descriptor& x,
                        const Descriptor* b, const Descriptor& y, const Descriptor* t = nullptr,
                        std::int64_t axis = -1) {
    Descriptor& pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise");
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode)
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &precision);
    if (axis >= 0) pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, &axis);
    pw.finalize("pointwise mode " + std::to_string(static_cast<int>(mode)));
    Descriptor& op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "pointwise op");
    op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw)
        .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b != nullptr) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
    op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    if (t != nullptr) op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, *t);
    op.finalize("pointwise op mode " + std::to_string(static_cast<int>(mode)));
    return op;
  }

  Descriptor& reduction(cudnnReduceTensorOp_t mode, const Descriptor& x, const Descriptor& y) {
    Descriptor& r = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction");
    const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
    r.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, &mode)
        .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &precision);
    r.finalize("reduction");
    Descriptor& op = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "reduction op");
    op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x)
        .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y)
        .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, r);
    op.finalize("reduction op");
    return op;
  }

  Descriptor& matmul(const Descriptor& a, const Descriptor& b, const Descriptor& c) {
    Descriptor& m = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul");
    const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
    m.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &precision);
    m.finalize("matmul");
    Descriptor& op = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "matmul op");
    op.set_desc(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a)
        .set_desc(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b)
        .set_desc(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c)
        .set_desc(CUDNN_ATTR_OPERATION_MATMUL_DESC, m);
    op.finalize("matmul op");
    return op;
  }

  Descriptor& build_graph(const ForwardParams& p);
  std::string build_execution_plan(Descriptor& graph);
};

namespace {

// The graph's tensors by uid; virtual ones count up from kVirtual.
enum : std::int64_t { kQ = 1, kK, kV, kO, kStats, kScale, kLowest, kVirtual = 100 };

}  // namespace

// The operation graph of softmax(Q K^T * scale [causal mask]) V with the
// row log-sum-exp as stats, finalized.
Descriptor& CudnnSdpa::Plan::build_graph(const ForwardParams& p) {
  Plan& g = *this;
  const std::int64_t b = p.batch, h = p.heads, sq = p.seqlen_q, sk = p.seqlen_k, d = p.head_dim;
  const cudnnDataType_t io = p.dtype == DType::fp16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  std::int64_t next_virtual = kVirtual;
  const std::vector<std::int64_t> s_dims{b, h, sq, sk}, s_strides{h * sq * sk, sq * sk, sk, 1};
  const std::vector<std::int64_t> row_dims{b, h, sq, 1}, row_strides{h * sq, sq, 1, 1};
  auto scores = [&](cudnnDataType_t type = CUDNN_DATA_FLOAT) -> Descriptor& {
    return g.tensor(next_virtual++, type, s_dims, s_strides, true);
  };
  auto per_row = [&]() -> Descriptor& { return g.tensor(next_virtual++, f32, row_dims, row_strides, true); };
  const std::vector<std::int64_t> one{1, 1, 1, 1};

  Descriptor& q = g.tensor(kQ, io, {b, h, sq, d}, {h * sq * d, sq * d, d, 1}, false);
  Descriptor& k_t = g.tensor(kK, io, {b, h, d, sk}, {h * sk * d, sk * d, 1, d}, false);  // K^T view
  Descriptor& v = g.tensor(kV, io, {b, h, sk, d}, {h * sk * d, sk * d, d, 1}, false);
  Descriptor& o = g.tensor(kO, io, {b, h, sq, d}, {h * sq * d, sq * d, d, 1}, false);
  Descriptor& stats = g.tensor(kStats, f32, row_dims, row_strides, false);
  Descriptor& scale_tensor = g.tensor(kScale, f32, one, one, false, true);

  std::vector<Descriptor*> ops;
  Descriptor& s = scores();
  ops.push_back(&g.matmul(q, k_t, s));
  Descriptor* last = &scores();
  ops.push_back(&g.pointwise(CUDNN_POINTWISE_MUL, f32, s, &scale_tensor, *last));
  Descriptor* lowest_tensor = nullptr;
  if (p.causal) {
    Descriptor& row = scores(CUDNN_DATA_INT32);
    Descriptor& col = scores(CUDNN_DATA_INT32);
    Descriptor& keep = scores(CUDNN_DATA_BOOLEAN);
    lowest_tensor = &g.tensor(kLowest, f32, one, one, false, true);
    Descriptor& masked = scores();
    ops.push_back(&g.pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, *last, nullptr, row, nullptr, 2));
    ops.push_back(&g.pointwise(CUDNN_POINTWISE_GEN_INDEX, CUDNN_DATA_INT32, *last, nullptr, col, nullptr, 3));
    ops.push_back(&g.pointwise(CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, &col, keep));
    ops.push_back(&g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, f32, *last, lowest_tensor, masked, &keep));
    last = &masked;
  }
  Descriptor& row_max = per_row();
  ops.push_back(&g.reduction(CUDNN_REDUCE_TENSOR_MAX, *last, row_max));
  Descriptor& shifted = scores();
  ops.push_back(&g.pointwise(CUDNN_POINTWISE_SUB, f32, *last, &row_max, shifted));
  Descriptor& exps = scores();
  ops.push_back(&g.pointwise(CUDNN_POINTWISE_EXP, f32, shifted, nullptr, exps));
  Descriptor& row_sum = per_row();
  ops.push_back(&g.reduction(CUDNN_REDUCE_TENSOR_ADD, exps, row_sum));
  Descriptor& log_sum = per_row();
  ops.push_back(&g.pointwise(CUDNN_POINTWISE_LOG, f32, row_sum, nullptr, log_sum));
  ops.push_back(&g.pointwise(CUDNN_POINTWISE_ADD, f32, row_max, &log_sum, stats));
  // cuDNN's fused engines take the second matmul's A operand (P) in the I/O type.
  Descriptor& probs = scores(io);
  ops.push_back(&g.pointwise(CUDNN_POINTWISE_DIV, f32, exps, &row_sum, probs));
  ops.push_back(&g.matmul(probs, v, o));

  Descriptor& graph = g.make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph");
  std::vector<cudnnBackendDescriptor_t> raw_ops;
  raw_ops.reserve(ops.size());
  for (Descriptor* op : ops) raw_ops.push_back(op->raw);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, &g.handle)
      .set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, raw_ops.data(),
           static_cast<std::int64_t>(raw_ops.size()));
  graph.finalize("operation graph");
  return graph;
}

// Engine configs from heuristics mode A, then the fallback list, then
// every engine cuDNN has for this graph; the first that builds a plan wins.
// Sets g.plan, or returns why none did.
std::string CudnnSdpa::Plan::build_execution_plan(Descriptor& graph) {
  Plan& g = *this;
  std::string failures;
  auto try_config = [&](Descriptor& config, const std::string& label) {
    Descriptor& candidate = g.make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan");
    try {
      candidate.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, &g.handle)
          .set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
      candidate.finalize("execution plan (" + label + ")");
      g.plan = &candidate;
    } catch (const CudnnError& error) {
      failures += std::string(failures.empty() ? "" : "; ") + error.what();
    }
  };
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    if (g.plan != nullptr) break;
    try {
      Descriptor& heuristics = g.make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "engine heuristics");
      heuristics.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
          .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode);
      heuristics.finalize("engine heuristics mode " + std::to_string(static_cast<int>(mode)));
      std::int64_t count = 0;
      check(cudnnBackendGetAttribute(heuristics.raw, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                     CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
            "engine heuristics: count");
      std::vector<Descriptor*> configs;
      std::vector<cudnnBackendDescriptor_t> raw_configs;
      for (std::int64_t i = 0; i < count; ++i) {
        configs.push_back(&g.make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config"));
        raw_configs.push_back(configs.back()->raw);
      }
      std::int64_t returned = 0;
      if (count > 0) {
        check(cudnnBackendGetAttribute(heuristics.raw, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                       CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned, raw_configs.data()),
              "engine heuristics: results");
      }
      if (returned == 0) {
        failures += std::string(failures.empty() ? "" : "; ") + "heuristics mode " +
                    std::to_string(static_cast<int>(mode)) + " offered no engine config";
      }
      for (std::int64_t i = 0; i < returned && g.plan == nullptr; ++i) {
        try_config(*configs[static_cast<std::size_t>(i)], "heuristic config " + std::to_string(i));
      }
    } catch (const CudnnError& error) {
      failures += std::string(failures.empty() ? "" : "; ") + error.what();
    }
  }
  if (g.plan == nullptr) {
    std::int64_t engines = 0;
    check(cudnnBackendGetAttribute(graph.raw, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, CUDNN_TYPE_INT64,
                                   1, nullptr, &engines),
          "operation graph: engine count");
    failures += "; " + std::to_string(engines) + " engines in cuDNN";
    for (std::int64_t index = 0; index < engines && g.plan == nullptr; ++index) {
      try {
        Descriptor& engine = g.make(CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine");
        engine.set_desc(CUDNN_ATTR_ENGINE_OPERATION_GRAPH, graph)
            .set(CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, &index);
        engine.finalize("engine " + std::to_string(index));
        Descriptor& config = g.make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine config");
        config.set_desc(CUDNN_ATTR_ENGINECFG_ENGINE, engine);
        config.finalize("engine config " + std::to_string(index));
        try_config(config, "engine " + std::to_string(index));
      } catch (const CudnnError&) {
        // Most engines do not take this graph; only the last reason is kept below.
      }
    }
  }
  return failures;
}

CudnnSdpa::CudnnSdpa(const ForwardParams& p, cudaStream_t stream) {
  try {
    plan_ = std::make_unique<Plan>();
    Plan& g = *plan_;
    check(cudnnCreate(&g.handle), "cudnnCreate");
    check(cudnnSetStream(g.handle, stream), "cudnnSetStream");
    Descriptor& graph = g.build_graph(p);
    const std::string failures = g.build_execution_plan(graph);
    if (g.plan == nullptr) throw CudnnError("no engine config builds a plan: " + failures);
    check(cudnnBackendGetAttribute(g.plan->raw, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                   nullptr, &g.workspace),
          "execution plan: workspace size");

    g.scale = p.softmax_scale;
    g.uids = {kQ, kK, kV, kO, kStats, kScale};
    g.pointers = {const_cast<void*>(p.q.data),
                  const_cast<void*>(p.k.data),
                  const_cast<void*>(p.v.data),
                  p.o,
                  p.lse,
                  &g.scale};
    if (p.causal) {
      g.uids.push_back(kLowest);
      g.pointers.push_back(&g.lowest);
    }
  } catch (const std::exception& error) {
    unavailable_ = std::string("cuDNN SDPA: ") + error.what();
    plan_.reset();
  }
}

CudnnSdpa::~CudnnSdpa() = default;

std::size_t CudnnSdpa::workspace_bytes() const {
  return plan_ ? static_cast<std::size_t>(plan_->workspace) : 0;
}

void CudnnSdpa::run(void* workspace) {
  if (!plan_) throw std::runtime_error(unavailable_);
  Plan& g = *plan_;
  if (!g.variant_pack) {
    g.variant_pack = std::make_unique<Descriptor>(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, "variant pack");
    g.variant_pack
        ->set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, g.uids.data(),
              static_cast<std::int64_t>(g.uids.size()))
        .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, g.pointers.data(),
             static_cast<std::int64_t>(g.pointers.size()))
        .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, &workspace);
    g.variant_pack->finalize("variant pack");
  }
  check(cudnnBackendExecute(g.handle, g.plan->raw, g.variant_pack->raw), "cudnnBackendExecute");
}

#else

struct CudnnSdpa::Plan {};

CudnnSdpa::CudnnSdpa(const ForwardParams&, cudaStream_t)
    : unavailable_("cuDNN SDPA: built without cuDNN (cudnn.h or libcudnn not found when configuring)") {}
CudnnSdpa::~CudnnSdpa() = default;
std::size_t CudnnSdpa::workspace_bytes() const {
  return 0;
}
void CudnnSdpa::run(void*) {
  throw std::runtime_error(unavailable_);
}

#endif

}  // namespace kw::attention
