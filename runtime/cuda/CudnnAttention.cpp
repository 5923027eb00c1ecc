//===- CudnnAttention.cpp - attention through cuDNN's fused kernels -------===//
#include "runtime/cuda/CudnnAttention.h"

#include <limits>

namespace strata::runtime::cuda {

using namespace cudnn;
using Descriptor = CudnnApi::Descriptor;
namespace uid = attention_uid;

std::string cudnnAttentionUnsupported(const CudnnAttentionShape &s,
                                      size_t version) {
  if (!s.bf16)
    return "its operands are fp32 (cuDNN's fused attention takes bf16)";
  if (s.dim % 8 != 0)
    return "head dimension " + std::to_string(s.dim) +
           " is not a multiple of 8";
  // 128 is what every architecture's backward takes (Hopper's goes to 256;
  // one bound keeps a plan's choice the same on every GPU).
  if (s.dim > 128)
    return "head dimension " + std::to_string(s.dim) + " is over 128";
  if (s.kvHeads <= 0 || s.heads % s.kvHeads != 0)
    return std::to_string(s.heads) + " query heads are not a multiple of " +
           std::to_string(s.kvHeads) + " kv heads";
  // cuDNN's grouping: query head h reads kv head h / (heads / kvHeads).
  for (int64_t h = 0; h < s.heads; ++h)
    if ((s.queryHeadOffset + h) / s.groupSize != h / (s.heads / s.kvHeads))
      return "query head " + std::to_string(h) + " reads kv head " +
             std::to_string((s.queryHeadOffset + h) / s.groupSize) +
             ", not the one cuDNN's grouping gives it";
  // With context parallelism a rank's rows are two chunks of the sequence
  // and the causal mask compares places in it. Against the rank's own rows
  // (the ring's step 0) places rise with the row in queries and keys
  // alike, so key j is at or before query i exactly where j <= i: cuDNN's
  // diagonal. Against another rank's, or every rank's gathered, it is not.
  if (s.context >= 2 && s.keys != s.seq)
    return "context-parallel attention over every rank's keys, gathered";
  if (s.context >= 2 && s.causal && s.ringStep != 0)
    return "the ring's step " + std::to_string(s.ringStep) +
           " masks by places in the sequence, not the diagonal";
  if (s.backward && s.seq == 1 && s.keys == 1)
    return "a backward over one query and one key";
  if (version == 91000 || version == 91001)
    return "cuDNN 9.10.0 and 9.10.1 have known faults in this attention";
  return "";
}

CudnnAttention::CudnnAttention(const CudnnApi &api, CudnnAttentionShape shape)
    : api(api), shape(shape), scale(shape.scale),
      negativeInfinity(-std::numeric_limits<float>::infinity()) {}

CudnnAttention::~CudnnAttention() {
  if (plan)
    api.cudnnBackendDestroyDescriptor(plan);
}

uint64_t CudnnAttention::rowSumBytes() const {
  return shape.backward
             ? uint64_t(shape.batch * shape.heads * shape.seq) * sizeof(float)
             : 0;
}

namespace {

/// The tensors both graphs take, as cuDNN's (batch, heads, rows, dim).
struct Operands {
  int64_t b, s, k, h, hk, d;
  explicit Operands(const CudnnAttentionShape &shape)
      : b(shape.batch), s(shape.seq), k(shape.keys), h(shape.heads),
        hk(shape.kvHeads), d(shape.dim) {}
  // q-shaped: strata's [b, s, h, d].
  Dims4 qDims() const { return {b, h, s, d}; }
  Dims4 qStrides() const { return {s * h * d, d, h * d, 1}; }
  // k- and v-shaped, and read transposed (dims 2 and 3 swapped).
  Dims4 kvDims() const { return {b, hk, k, d}; }
  Dims4 kvStrides() const { return {k * hk * d, d, hk * d, 1}; }
  Dims4 kvTDims() const { return {b, hk, d, k}; }
  Dims4 kvTStrides() const { return {k * hk * d, d, 1, hk * d}; }
  // Scores (b, h, s, k), their transpose, and a statistic per row.
  Dims4 scoreDims() const { return {b, h, s, k}; }
  Dims4 scoreStrides() const { return {h * s * k, s * k, k, 1}; }
  Dims4 scoreTDims() const { return {b, h, k, s}; }
  Dims4 scoreTStrides() const { return {h * s * k, s * k, 1, k}; }
  Dims4 rowDims() const { return {b, h, s, 1}; }
  Dims4 rowStrides() const { return {h * s, s, 1, 1}; }
};

constexpr Dims4 kScalar = {1, 1, 1, 1};

/// `logits` with the keys a query does not see set to -inf: key j is seen
/// by query i when i >= j (row and column indices compared, then a
/// select). `scores(type)` makes a virtual score-shaped tensor.
template <class Scores>
Descriptor causalMask(CudnnGraphBuilder &g, Scores scores, Descriptor logits) {
  Descriptor ninf =
      g.tensor(uid::kNegativeInfinity, kFloat, kScalar, kScalar, false, true);
  Descriptor row = scores(kInt32), column = scores(kInt32);
  g.pointwise(kGenerateIndex, logits, nullptr, nullptr, row, 2);
  g.pointwise(kGenerateIndex, logits, nullptr, nullptr, column, 3);
  Descriptor seen = scores(kBoolean);
  g.pointwise(kCompareGreaterEqual, row, column, nullptr, seen, -1, kBoolean);
  Descriptor masked = scores(kFloat);
  g.pointwise(kBinarySelect, logits, ninf, seen, masked);
  return masked;
}

} // namespace

void CudnnAttention::buildForward() {
  CudnnGraphBuilder &g = *graph;
  Operands t(shape);
  int64_t next = uid::kFirstVirtual;
  auto scores = [&](DataType type = kFloat) {
    return g.tensor(next++, type, t.scoreDims(), t.scoreStrides(), true);
  };
  auto rows = [&] {
    return g.tensor(next++, kFloat, t.rowDims(), t.rowStrides(), true);
  };
  Descriptor q = g.tensor(uid::kQ, kBfloat16, t.qDims(), t.qStrides(), false);
  Descriptor kT =
      g.tensor(uid::kK, kBfloat16, t.kvTDims(), t.kvTStrides(), false);
  Descriptor v = g.tensor(uid::kV, kBfloat16, t.kvDims(), t.kvStrides(), false);
  Descriptor o = g.tensor(uid::kO, kBfloat16, t.qDims(), t.qStrides(), false);
  Descriptor stats =
      g.tensor(uid::kStats, kFloat, t.rowDims(), t.rowStrides(), false);
  Descriptor scaleIn =
      g.tensor(uid::kScale, kFloat, kScalar, kScalar, false, true);

  Descriptor s = scores();
  g.matmul(q, kT, s);
  Descriptor scaled = scores();
  g.pointwise(kMul, s, scaleIn, nullptr, scaled);
  if (shape.causal)
    scaled = causalMask(g, scores, scaled);
  // The softmax, with the row's log-sum-exp kept: max + log Σ exp(x - max).
  Descriptor max = rows();
  g.reduction(kReduceMax, scaled, max);
  Descriptor shifted = scores();
  g.pointwise(kSub, scaled, max, nullptr, shifted);
  Descriptor exps = scores();
  g.pointwise(kExp, shifted, nullptr, nullptr, exps);
  Descriptor sum = rows();
  g.reduction(kReduceAdd, exps, sum);
  Descriptor logSum = rows();
  g.pointwise(kLog, sum, nullptr, nullptr, logSum);
  g.pointwise(kAdd, max, logSum, nullptr, stats);
  // P in the operands' type, as the product with V takes it.
  Descriptor p = scores(kBfloat16);
  g.pointwise(kDiv, exps, sum, nullptr, p);
  g.matmul(p, v, o);
}

void CudnnAttention::buildBackward() {
  CudnnGraphBuilder &g = *graph;
  Operands t(shape);
  int64_t next = uid::kFirstVirtual;
  auto scores = [&](DataType type = kFloat) {
    return g.tensor(next++, type, t.scoreDims(), t.scoreStrides(), true);
  };
  auto transposed = [&] {
    return g.tensor(next++, kBfloat16, t.scoreTDims(), t.scoreTStrides(), true);
  };
  Descriptor q = g.tensor(uid::kQ, kBfloat16, t.qDims(), t.qStrides(), false);
  Descriptor kT =
      g.tensor(uid::kK, kBfloat16, t.kvTDims(), t.kvTStrides(), false);
  Descriptor vT =
      g.tensor(uid::kV, kBfloat16, t.kvTDims(), t.kvTStrides(), false);
  Descriptor o = g.tensor(uid::kO, kBfloat16, t.qDims(), t.qStrides(), false);
  Descriptor dout =
      g.tensor(uid::kDout, kBfloat16, t.qDims(), t.qStrides(), false);
  Descriptor stats =
      g.tensor(uid::kStats, kFloat, t.rowDims(), t.rowStrides(), false);
  Descriptor dq = g.tensor(uid::kDq, kBfloat16, t.qDims(), t.qStrides(), false);
  Descriptor dk =
      g.tensor(uid::kDk, kBfloat16, t.kvDims(), t.kvStrides(), false);
  Descriptor dv =
      g.tensor(uid::kDv, kBfloat16, t.kvDims(), t.kvStrides(), false);
  Descriptor scaleIn =
      g.tensor(uid::kScale, kFloat, kScalar, kScalar, false, true);
  Descriptor oneIn = g.tensor(uid::kOne, kFloat, kScalar, kScalar, false, true);
  Descriptor rowSum =
      g.tensor(uid::kRowSum, kFloat, t.rowDims(), t.rowStrides(), false);

  // D = rowsum(dO ∘ O), into rowSum (times 1: the frontend's form).
  Descriptor products =
      g.tensor(next++, kFloat, t.qDims(),
               {t.h * t.s * t.d, t.s * t.d, t.h * t.d, 1}, true);
  g.pointwise(kMul, dout, o, nullptr, products);
  Descriptor sums = g.tensor(next++, kFloat, t.rowDims(), t.rowStrides(), true);
  g.reduction(kReduceAdd, products, sums);
  g.pointwise(kMul, sums, oneIn, nullptr, rowSum);

  // P = exp(scale·Q·Kᵀ - lse), masked.
  Descriptor s = scores();
  g.matmul(q, kT, s);
  Descriptor scaled = scores();
  g.pointwise(kMul, s, scaleIn, nullptr, scaled);
  Descriptor logits = scores();
  g.pointwise(kSub, scaled, stats, nullptr, logits);
  if (shape.causal)
    logits = causalMask(g, scores, logits);
  Descriptor p = scores();
  g.pointwise(kExp, logits, nullptr, nullptr, p);

  // dV = Pᵀ·dO and dK = dSᵀ·Q, summed over the query heads of a kv head
  // when there are more query heads.
  auto intoKv = [&](Descriptor a, Descriptor b, Descriptor out) {
    if (t.h == t.hk) {
      g.matmul(a, b, out);
      return;
    }
    Descriptor full = g.tensor(next++, kBfloat16, {t.b, t.h, t.k, t.d},
                               {t.h * t.k * t.d, t.k * t.d, t.d, 1}, true);
    g.matmul(a, b, full);
    g.reduction(kReduceAdd, full, out);
  };
  Descriptor pT = transposed();
  g.reshape(p, pT);
  intoKv(pT, dout, dv);

  // dS = scale · P ∘ (dO·Vᵀ - D).
  Descriptor dP = scores();
  g.matmul(dout, vT, dP);
  Descriptor centered = scores();
  g.pointwise(kSub, dP, rowSum, nullptr, centered);
  Descriptor weighted = scores();
  g.pointwise(kMul, centered, p, nullptr, weighted);
  Descriptor dS = scores();
  g.pointwise(kMul, weighted, scaleIn, nullptr, dS);
  Descriptor dST = transposed();
  g.reshape(dS, dST);
  intoKv(dST, q, dk);

  // dQ = dS·K in one product: the deterministic form (no f32 accumulator).
  Descriptor k = g.tensor(next++, kBfloat16, t.kvDims(), t.kvStrides(), true);
  g.reshape(kT, k);
  g.matmul(dS, k, dq);
}

std::string CudnnAttention::prepare(CudnnApi::Handle handle,
                                    uint64_t maxWorkspace) {
  graph = std::make_unique<CudnnGraphBuilder>(api);
  CudnnGraphBuilder &g = *graph;
  if (shape.backward)
    buildBackward();
  else
    buildForward();

  Descriptor opGraph = g.create(kOperationGraph, "operation graph");
  const std::vector<Descriptor> &ops = g.ops();
  g.set(opGraph, kOperationGraphOps, kTypeDescriptor, int64_t(ops.size()),
        ops.data(), "operation graph");
  g.set(opGraph, kOperationGraphHandle, kTypeHandle, 1, &handle,
        "operation graph");
  g.finalize(opGraph, "operation graph");

  Descriptor heuristics = g.create(kEngineHeuristics, "engine heuristics");
  const int mode = kHeuristicsModeA;
  g.set(heuristics, kEngineHeuristicsGraph, kTypeDescriptor, 1, &opGraph,
        "engine heuristics");
  g.set(heuristics, kEngineHeuristicsMode, kTypeHeuristicMode, 1, &mode,
        "engine heuristics");
  g.finalize(heuristics, "engine heuristics");
  int64_t count = 0;
  g.get(heuristics, kEngineHeuristicsResults, kTypeDescriptor, 0, &count,
        nullptr, "engine heuristics");
  if (!g.ok())
    return g.error();
  if (count <= 0)
    return "cuDNN's heuristics found no engine for this graph";
  std::vector<Descriptor> configs;
  for (int64_t i = 0; i < count; ++i)
    configs.push_back(g.create(kEngineConfig, "engine configuration"));
  int64_t returned = 0;
  g.get(heuristics, kEngineHeuristicsResults, kTypeDescriptor, count, &returned,
        configs.data(), "engine heuristics");
  if (!g.ok())
    return g.error();

  // The first configuration that builds deterministically within the
  // workspace; why none did, from the last one tried.
  std::string why = "cuDNN's heuristics found no engine for this graph";
  for (int64_t i = 0; i < returned && i < count; ++i) {
    // Its engine's numerical notes; a configuration whose notes cannot be
    // read is passed over (its determinism unknown).
    Descriptor engine = g.create(kEngine, "engine");
    if (!g.ok())
      return g.error();
    int64_t got = 0, noteCount = 0;
    int notes[16] = {};
    int status = api.cudnnBackendGetAttribute(
        configs[i], kEngineConfigEngine, kTypeDescriptor, 1, &got, &engine);
    if (status == 0 && got == 1)
      status = api.cudnnBackendGetAttribute(engine, kEngineNumericalNote,
                                            kTypeNumericalNote, 16, &noteCount,
                                            notes);
    if (status != 0) {
      why = api.error(status, "cudnnBackendGetAttribute(engine)");
      continue;
    }
    bool deterministic = true;
    for (int64_t n = 0; n < noteCount && n < 16; ++n)
      deterministic &= notes[n] != kNumericalNoteNondeterministic;
    if (!deterministic) {
      why = "cuDNN offered only engines that are not deterministic";
      continue;
    }
    Descriptor candidate = nullptr;
    if (int status =
            api.cudnnBackendCreateDescriptor(kExecutionPlan, &candidate))
      return api.error(status, "cudnnBackendCreateDescriptor(execution plan)");
    const char *call = "cudnnBackendSetAttribute(execution plan)";
    status = api.cudnnBackendSetAttribute(candidate, kPlanEngineConfig,
                                          kTypeDescriptor, 1, &configs[i]);
    if (status == 0) {
      call = "cudnnBackendFinalize(execution plan)";
      status = api.cudnnBackendFinalize(candidate);
    }
    int64_t bytes = 0, n = 0;
    if (status == 0) {
      call = "cudnnBackendGetAttribute(execution plan)";
      status = api.cudnnBackendGetAttribute(candidate, kPlanWorkspaceSize,
                                            kTypeInt64, 1, &n, &bytes);
    }
    if (status != 0) {
      api.cudnnBackendDestroyDescriptor(candidate);
      why = api.error(status, call);
      if (notSupported(status))
        continue;
      return why;
    }
    if (bytes < 0 || uint64_t(bytes) > maxWorkspace) {
      api.cudnnBackendDestroyDescriptor(candidate);
      why = "cuDNN's engine needs " + std::to_string(bytes) +
            " bytes of workspace, more than the " +
            std::to_string(maxWorkspace) + " strata sets aside";
      continue;
    }
    plan = candidate;
    workspace = uint64_t(bytes);
    return "";
  }
  return why;
}

std::string CudnnAttention::run(CudnnApi::Handle handle, CUstream stream,
                                const Pointers &p) const {
  if (int status = api.cudnnSetStream(handle, stream))
    return api.error(status, "cudnnSetStream");
  // By-value operands are read from the host when the pack is executed.
  std::vector<int64_t> uids;
  std::vector<void *> pointers;
  auto add = [&](int64_t id, const void *pointer) {
    uids.push_back(id);
    pointers.push_back(const_cast<void *>(pointer));
  };
  add(uid::kQ, p.q);
  add(uid::kK, p.k);
  add(uid::kV, p.v);
  add(uid::kO, p.o);
  add(uid::kStats, p.lse);
  add(uid::kScale, &scale);
  if (shape.causal)
    add(uid::kNegativeInfinity, &negativeInfinity);
  if (shape.backward) {
    add(uid::kDout, p.dout);
    add(uid::kDq, p.dq);
    add(uid::kDk, p.dk);
    add(uid::kDv, p.dv);
    add(uid::kOne, &one);
    add(uid::kRowSum, p.rowSum);
  }
  Descriptor pack = nullptr;
  if (int status = api.cudnnBackendCreateDescriptor(kVariantPack, &pack))
    return api.error(status, "cudnnBackendCreateDescriptor(variant pack)");
  void *workspacePointer = p.workspace;
  int status = api.cudnnBackendSetAttribute(pack, kVariantPackWorkspace,
                                            kTypeVoidPtr, 1, &workspacePointer);
  if (status == 0)
    status =
        api.cudnnBackendSetAttribute(pack, kVariantPackPointers, kTypeVoidPtr,
                                     int64_t(pointers.size()), pointers.data());
  if (status == 0)
    status = api.cudnnBackendSetAttribute(pack, kVariantPackUids, kTypeInt64,
                                          int64_t(uids.size()), uids.data());
  if (status == 0)
    status = api.cudnnBackendFinalize(pack);
  std::string error = api.error(status, "cudnnBackendFinalize(variant pack)");
  if (status == 0)
    error = api.error(api.cudnnBackendExecute(handle, plan, pack),
                      "cudnnBackendExecute");
  api.cudnnBackendDestroyDescriptor(pack);
  return error;
}

} // namespace strata::runtime::cuda
