//===- KernelCatalog.cpp - each kernel's contract, checked ----------------===//
//
// The generic half of the check comes from Kernels.def (operand counts and
// dtypes, attribute kinds); each kernel's shape rules are one function
// below. A rule may assume the generic half passed.
//
//===----------------------------------------------------------------------===//
#include "runtime/plan/Ownership.h"
#include "runtime/plan/PlanCheck.h"

#include <cmath>
#include <sstream>

namespace strata::runtime {

int KernelSpec::inputs() const {
  int n = 0;
  for (const OperandSpec &operand : operands)
    n += !operand.output;
  return n;
}

namespace {

std::vector<KernelSpec> buildSpecs() {
  std::vector<KernelSpec> specs;
#define KERNEL(Name, text) specs.push_back({text, {}, {}});
#define MATH(text) specs.back().math = text;
#define IN(operand, dtypes)                                                    \
  specs.back().operands.push_back({#operand, DTypes::dtypes, false, false});
#define OUT(operand, dtypes)                                                   \
  specs.back().operands.push_back({#operand, DTypes::dtypes, true, false});
#define OPT_OUT(operand, dtypes)                                               \
  specs.back().operands.push_back({#operand, DTypes::dtypes, true, true});
#define INT(a) specs.back().attrs.push_back({#a, AttrKind::Int});
#define FLOAT(a) specs.back().attrs.push_back({#a, AttrKind::Float});
#define BOOL(a) specs.back().attrs.push_back({#a, AttrKind::Bool});
#define INTS(a) specs.back().attrs.push_back({#a, AttrKind::Ints});
#include "runtime/plan/Kernels.def"
  return specs;
}

const std::vector<KernelSpec> &specs() {
  static const std::vector<KernelSpec> all = buildSpecs();
  return all;
}

} // namespace

const KernelSpec &kernelSpec(KernelId id) {
  return specs()[static_cast<size_t>(id)];
}

std::string fusedKernelName(const std::vector<KernelId> &members) {
  std::string name;
  for (KernelId kernel : members)
    name += (name.empty() ? "" : "+") + std::string(kernelName(kernel));
  return name;
}

int findKernel(const std::string &name) {
  for (int i = 0; i < kKernelCount; ++i)
    if (name == specs()[i].name)
      return i;
  return -1;
}

std::string shapeText(const Buffer &b) {
  return dtypeName(b.dtype) + shapeText(b.shape);
}

std::string named(const Buffer &b) {
  return "'" + b.name + "' " + shapeText(b);
}

namespace {

/// One launch's operands and attributes, and the first rule it breaks.
class Rules {
public:
  Rules(const LaunchOp &launch, const std::vector<Buffer> &buffers,
        const CheckContext &context)
      : launch(launch), buffers(buffers), context(context) {}

  bool has(unsigned operand) const {
    return launch.operands[operand] != kNoBuffer;
  }
  const Buffer &at(unsigned operand) const {
    return buffers[launch.operands[operand]];
  }
  int64_t i(unsigned attr) const { return launch.attrs[attr].i; }
  const std::vector<int64_t> &list(unsigned attr) const {
    return launch.attrs[attr].list;
  }

  void require(bool ok, const std::string &message) {
    if (!ok && error.empty())
      error = message;
  }
  void sameCount(unsigned a, unsigned b) {
    require(at(a).elements == at(b).elements,
            named(at(a)) + " and " + named(at(b)) +
                " must have as many elements");
  }
  void scalar(unsigned operand) {
    require(at(operand).elements == 1, "'" + at(operand).name +
                                           "' must be a scalar, is " +
                                           shapeText(at(operand)));
  }
  int64_t lastDim(unsigned operand) {
    const Buffer &b = at(operand);
    require(!b.shape.empty(), "'" + b.name + "' needs a rank >= 1");
    return b.shape.empty() ? 1 : b.shape.back();
  }
  int64_t rowsOf(unsigned operand) {
    int64_t last = lastDim(operand);
    return last > 0 ? at(operand).elements / last : 0;
  }
  /// `operand` holds one value per row of `of`.
  void perRow(unsigned operand, unsigned of) {
    require(at(operand).elements == rowsOf(of),
            "'" + at(operand).name + "' must be one value per row of '" +
                at(of).name + "' " + shapeText(at(of)) + ", is " +
                shapeText(at(operand)));
  }
  /// The right operand broadcasts over the rows of the left.
  void broadcasts(unsigned x, unsigned y) {
    require(at(y).elements > 0 && at(x).elements % at(y).elements == 0,
            named(at(y)) + " does not broadcast over " + named(at(x)));
  }
  /// A vocabulary of `size` with this rank's columns from `offset` (past
  /// the vocabulary, a shard of padding only): a whole shard, or the
  /// vocabulary's last block, which may be narrower than the blocks before
  /// it (strata-fuse-output-layer's).
  void vocabulary(int64_t size, int64_t offset, int64_t columns) {
    bool last = offset < size && columns >= size - offset;
    require(size >= 1 && offset >= 0 && columns > 0 &&
                (offset % columns == 0 || last),
            "vocab_size " + std::to_string(size) + " and vocab_offset " +
                std::to_string(offset) + " do not describe a shard of " +
                std::to_string(columns) + " columns");
    // Labels are tokens of the plan's vocabulary: every one must be a
    // column of the loss, or one rank's read would run past its row.
    require(uint64_t(size) >= context.vocabSize,
            "the loss's vocabulary (" + std::to_string(size) +
                ") is smaller than the plan's (" +
                std::to_string(context.vocabSize) + ")");
  }
  /// `operand` holds the run's hyperparameters (Hyper.h).
  void hyper(unsigned operand) {
    require(at(operand).elements == kHyperSlots,
            "'" + at(operand).name + "' must hold the " +
                std::to_string(kHyperSlots) + " hyperparameters");
  }
  /// (begin, length[, ...]) tuples of `width` within `bound` elements, in
  /// increasing order without overlaps.
  void segments(const std::vector<int64_t> &values, size_t width, int64_t bound,
                const std::string &what) {
    bool ok = values.size() % width == 0;
    int64_t last = 0;
    for (size_t s = 0; ok && s < values.size(); s += width) {
      ok = values[s] >= last && values[s + 1] >= 0 &&
           values[s] <= bound - values[s + 1];
      // Summed only once checked: a crafted pair overflowed (fuzz-plan).
      if (ok)
        last = values[s] + values[s + 1];
    }
    require(ok, "segments must be (begin, length" +
                    std::string(width > 2 ? ", ..." : "") + ") within " + what +
                    " of " + std::to_string(bound) +
                    " elements, in increasing order");
  }
  /// The flat optimizer's windows (Ownership.h): this rank's part of each
  /// within `bound` elements, in increasing order, its state within
  /// `stateBound` elements.
  void windows(const std::vector<int64_t> &values, int64_t part, int64_t bound,
               int64_t stateBound, const std::string &what) {
    bool ok = values.size() % kWindowWidth == 0 && part >= 0;
    int64_t last = 0;
    for (size_t w = 0; ok && w < values.size(); w += kWindowWidth) {
      int64_t begin = values[w], length = values[w + 1], state = values[w + 2];
      ok = begin >= 0 && length >= 0 && state >= 0 && begin <= bound &&
           (length == 0 || part <= (bound - begin) / length - 1) &&
           state <= stateBound - length;
      if (!ok)
        break;
      int64_t from = begin + part * length;
      ok = from >= last;
      last = from + length;
    }
    require(ok, "windows must be (begin, length, state) with the rank's part " +
                    std::to_string(part) + " within " + what + " of " +
                    std::to_string(bound) +
                    " elements, in increasing order, "
                    "and its state within " +
                    std::to_string(stateBound));
  }

  const LaunchOp &launch;
  const std::vector<Buffer> &buffers;
  const CheckContext &context;
  std::string error;
};

// One rule per kernel, named after it: declared from the catalog, so that
// a kernel without its rule does not build.
#define KERNEL(Name, text) void check##Name(Rules &r);
#include "runtime/plan/Kernels.def"

using namespace kernels;

void checkFill(Rules &) {}

void checkCopy(Rules &r) { r.sameCount(Copy::op::x, Copy::op::y); }
void checkKeepOnFirst(Rules &r) {
  r.sameCount(KeepOnFirst::op::x, KeepOnFirst::op::y);
}

/// A [vocab, hidden] table and `rows`, one row of it per id.
void checkEmbedding(Rules &r, unsigned table, unsigned ids, unsigned rows) {
  const std::vector<int64_t> &shape = r.at(table).shape;
  r.require(shape.size() == 2, "'" + r.at(table).name +
                                   "' must be [vocab, hidden], is " +
                                   shapeText(r.at(table)));
  if (shape.size() == 2)
    r.require(r.at(rows).elements % shape[1] == 0 &&
                  r.at(rows).elements / shape[1] == r.at(ids).elements,
              "'" + r.at(rows).name + "' must be ids x hidden");
}
void checkEmbeddingFwd(Rules &r) {
  using namespace EmbeddingFwd;
  checkEmbedding(r, op::table, op::ids, op::y);
}
void checkEmbeddingBwd(Rules &r) {
  using namespace EmbeddingBwd;
  checkEmbedding(r, op::dtable, op::ids, op::dy);
}

void checkBinary(Rules &r) {
  // Add, Sub and Mul share their operand positions.
  r.sameCount(Add::op::x, Add::op::z);
  r.broadcasts(Add::op::x, Add::op::y);
}
void checkAdd(Rules &r) { checkBinary(r); }
void checkSub(Rules &r) { checkBinary(r); }
void checkMul(Rules &r) { checkBinary(r); }

void checkScale(Rules &r) { r.sameCount(Scale::op::x, Scale::op::y); }

void checkDropout(Rules &r) {
  using namespace Dropout;
  const Buffer &x = r.at(op::x);
  r.sameCount(op::x, op::y);
  r.require(!x.shape.empty() && x.shape[0] == r.at(op::keys).elements,
            "dropout needs a key per sample: 'keys' must hold x's first "
            "dimension");
  double rate = r.launch.attrs[attr::rate].f;
  r.require(std::isfinite(rate) && rate >= 0 && rate < 1,
            "dropout's rate must be in [0, 1)");
  int64_t dim = r.i(attr::split_dim), offset = r.i(attr::split_offset),
          size = r.i(attr::split_size);
  r.require(dim == 0 ||
                (dim > 0 && dim < int64_t(x.shape.size()) && offset >= 0 &&
                 size >= x.shape[dim] && offset <= size - x.shape[dim]),
            "dropout's split must be a dimension past the batch whose share "
            "lies within its unsplit size");
}

void checkSumTo(Rules &r) {
  r.require(r.at(SumTo::op::y).elements > 0 &&
                r.at(SumTo::op::x).elements % r.at(SumTo::op::y).elements == 0,
            "sum_to needs a whole number of rows");
}

/// A context-parallel launch's size and rank (runtime/plan/ContextPositions.h):
/// c of 0 or 1 is the whole sequence; else its rank is one of c and its
/// `rows` (a rank's share of the sequence) cut into its two chunks.
void checkContext(Rules &r, unsigned context, unsigned rank, int64_t rows) {
  // c within the world's bound: the shape checks' products cannot wrap.
  int64_t c = r.i(context), i = r.i(rank);
  r.require(c >= 0 && c <= int64_t(kMaxWorldSize) &&
                (c < 2 || (i >= 0 && i < c && rows % 2 == 0)),
            "context parallelism of " + std::to_string(c) +
                " ranks with rank " + std::to_string(i) + " over " +
                std::to_string(rows) +
                " rows: the rank must be one of them and the rows two equal "
                "chunks");
  // In a context-parallel plan, the plan's size at the rank's own
  // coordinate (a plan edited by hand could say another).
  const Plan *plan = r.context.plan;
  if (c >= 2 && plan && plan->contextParallel > 1) {
    int64_t mine = plan->coordinates(r.context.rank)[mesh::kContext];
    r.require(c == int64_t(plan->contextParallel) && i == mine,
              "context parallelism of " + std::to_string(c) +
                  " ranks at rank " + std::to_string(i) +
                  ", but the plan's is " +
                  std::to_string(plan->contextParallel) +
                  " and this rank's coordinate " + std::to_string(mine));
  }
}

/// add_positions and sum_positions: x [batch, rows, width] and a table of
/// the whole sequence's places, [rows · c, width].
void checkPositions(Rules &r, unsigned x, unsigned table, unsigned context,
                    unsigned rank) {
  const Buffer &rowsOf = r.at(x), &places = r.at(table);
  bool shaped = rowsOf.shape.size() == 3 && places.shape.size() == 2;
  r.require(shaped, "a position table's rows need x [batch, rows, width] and "
                    "the table [places, width]");
  if (!shaped)
    return;
  int64_t c = std::max<int64_t>(r.i(context), 1);
  checkContext(r, context, rank, rowsOf.shape[1]);
  r.require(places.shape[1] == rowsOf.shape[2] &&
                places.shape[0] == rowsOf.shape[1] * c,
            "the position table " + shapeText(places) + " must hold the " +
                std::to_string(c) + " ranks' " + shapeText(rowsOf) +
                " rows' places, as wide");
}
void checkAddPositions(Rules &r) {
  using namespace AddPositions;
  checkPositions(r, op::x, op::table, attr::context_parallel,
                 attr::context_rank);
  r.sameCount(op::x, op::z);
}
void checkSumPositions(Rules &r) {
  using namespace SumPositions;
  checkPositions(r, op::x, op::y, attr::context_parallel, attr::context_rank);
}

void checkAccumulate(Rules &r) {
  r.sameCount(Accumulate::op::x, Accumulate::op::y);
}

void checkGeluFwd(Rules &r) { r.sameCount(GeluFwd::op::x, GeluFwd::op::y); }
void checkSiluFwd(Rules &r) { r.sameCount(SiluFwd::op::x, SiluFwd::op::y); }
void checkGeluBwd(Rules &r) {
  r.sameCount(GeluBwd::op::x, GeluBwd::op::dy);
  r.sameCount(GeluBwd::op::x, GeluBwd::op::dx);
}

void checkGeluTanhFwd(Rules &r) {
  r.sameCount(GeluTanhFwd::op::x, GeluTanhFwd::op::y);
}

void checkGeluTanhBwd(Rules &r) {
  r.sameCount(GeluTanhBwd::op::x, GeluTanhBwd::op::dy);
  r.sameCount(GeluTanhBwd::op::x, GeluTanhBwd::op::dx);
}
void checkSiluBwd(Rules &r) {
  r.sameCount(SiluBwd::op::x, SiluBwd::op::dy);
  r.sameCount(SiluBwd::op::x, SiluBwd::op::dx);
}

void checkNormWeights(Rules &r, unsigned x, std::vector<unsigned> vectors) {
  int64_t cols = r.lastDim(x);
  for (unsigned v : vectors)
    r.require(r.at(v).elements == cols,
              named(r.at(v)) + " must match the last dimension of " +
                  named(r.at(x)));
}
void checkLayerNormFwd(Rules &r) {
  using namespace LayerNormFwd;
  checkNormWeights(r, op::x, {op::weight, op::bias});
  r.sameCount(op::x, op::y);
}
void checkLayerNormBwd(Rules &r) {
  using namespace LayerNormBwd;
  checkNormWeights(r, op::x, {op::weight, op::dweight, op::dbias});
  r.sameCount(op::x, op::dy);
  r.sameCount(op::x, op::dx);
}
void checkRmsNormFwd(Rules &r) {
  using namespace RmsNormFwd;
  checkNormWeights(r, op::x, {op::weight});
  r.sameCount(op::x, op::y);
}
void checkRmsNormBwd(Rules &r) {
  using namespace RmsNormBwd;
  checkNormWeights(r, op::x, {op::weight, op::dweight});
  r.sameCount(op::x, op::dy);
  r.sameCount(op::x, op::dx);
}

void checkTranspose(Rules &r) {
  using namespace Transpose;
  const std::vector<int64_t> &perm = r.list(attr::permutation);
  const Buffer &x = r.at(op::x);
  bool valid = perm.size() == x.shape.size();
  std::vector<int64_t> shape;
  std::vector<bool> seen(x.shape.size(), false);
  for (int64_t p : perm) {
    if (!valid || p < 0 || p >= int64_t(x.shape.size()) || seen[p]) {
      valid = false;
      break;
    }
    seen[p] = true;
    shape.push_back(x.shape[p]);
  }
  r.require(valid && shape == r.at(op::y).shape,
            "transpose permutation does not map " + shapeText(x) + " to " +
                shapeText(r.at(op::y)));
}

void checkRope(Rules &r) {
  const Buffer &x = r.at(Rope::op::x);
  r.require(x.shape.size() == 4 && x.shape[3] % 2 == 0,
            "rope needs [batch, seq, heads, even head_dim], got " +
                shapeText(x));
  r.sameCount(Rope::op::x, Rope::op::y);
  r.require(std::isfinite(r.launch.attrs[Rope::attr::base].f) &&
                r.launch.attrs[Rope::attr::base].f > 0,
            "rope's base must be positive");
  if (x.shape.size() == 4)
    checkContext(r, Rope::attr::context_parallel, Rope::attr::context_rank,
                 x.shape[1]);
}

/// Attention forward and backward share q, k, v and the attributes at the
/// same positions.
void checkAttention(Rules &r, unsigned lse) {
  using namespace AttentionFwd;
  const Buffer &q = r.at(op::q), &k = r.at(op::k), &v = r.at(op::v);
  bool ranks =
      q.shape.size() == 4 && k.shape.size() == 4 && v.shape.size() == 4;
  r.require(ranks, "attention operands must be [batch, seq, heads, dim]");
  if (!ranks)
    return;
  // Query heads [offset, offset + H) read kv heads (offset + i) / group.
  int64_t group = r.i(attr::group_size), offset = r.i(attr::query_head_offset);
  bool grouped = group > 0 && offset >= 0 && k.shape[2] > 0 &&
                 (offset + q.shape[2] - 1) / group < k.shape[2];
  r.require(k.shape == v.shape && q.shape[0] == k.shape[0] &&
                q.shape[3] == k.shape[3] && grouped,
            "attention shapes disagree: q " + shapeText(q) + ", k " +
                shapeText(k) + ", v " + shapeText(v) + " (group size " +
                std::to_string(group) + ", first query head " +
                std::to_string(offset) + ")");
  // With context parallelism the keys are every rank's, gathered, or one
  // rank's, the ring's step's (one of c steps; 0 when gathered).
  int64_t c = std::max<int64_t>(r.i(attr::context_parallel), 1),
          step = r.i(attr::ring_step);
  checkContext(r, attr::context_parallel, attr::context_rank, q.shape[1]);
  bool ring = c > 1 && k.shape[1] == q.shape[1];
  if (r.i(attr::causal) || c > 1)
    r.require(ring || q.shape[1] * c == k.shape[1],
              c > 1 ? "context-parallel attention needs the keys of all " +
                          std::to_string(c) + " ranks (" + std::to_string(c) +
                          " times the query rows) or of one (as many)"
                    : std::string("causal attention needs equal query and "
                                  "key lengths"));
  r.require(ring ? step >= 0 && step < c : step == 0,
            "attention's ring step " + std::to_string(step) +
                (ring ? " is not one of the ring's " + std::to_string(c)
                      : std::string(" with keys that are not one rank's "
                                    "(it must be 0)")));
  r.require(r.at(lse).elements == q.shape[0] * q.shape[1] * q.shape[2],
            "the log-sum-exp '" + r.at(lse).name +
                "' must be one f32 per query row ([batch, heads, seq]), is " +
                shapeText(r.at(lse)));
}
void checkAttentionFwd(Rules &r) {
  checkAttention(r, AttentionFwd::op::lse);
  r.sameCount(AttentionFwd::op::q, AttentionFwd::op::o);
}
void checkAttentionBwd(Rules &r) {
  using namespace AttentionBwd;
  static_assert(
      unsigned(op::q) == unsigned(AttentionFwd::op::q) &&
      unsigned(attr::causal) == unsigned(AttentionFwd::attr::causal) &&
      unsigned(attr::context_parallel) ==
          unsigned(AttentionFwd::attr::context_parallel) &&
      unsigned(attr::context_rank) ==
          unsigned(AttentionFwd::attr::context_rank) &&
      unsigned(attr::ring_step) == unsigned(AttentionFwd::attr::ring_step));
  checkAttention(r, op::lse);
  for (unsigned same : {op::o, op::dout, op::dq})
    r.sameCount(op::q, same);
  r.sameCount(op::k, op::dk);
  r.sameCount(op::v, op::dv);
}

/// o [batch, seq, heads, dim] and one log-sum-exp per row, [batch,
/// heads, seq]; the step's the same.
void checkAttentionMerge(Rules &r) {
  using namespace AttentionMerge;
  const Buffer &o = r.at(op::o);
  r.require(o.shape.size() == 4 && r.at(op::o_step).shape == o.shape,
            "attention_merge's outputs must be [batch, seq, heads, dim], the "
            "step's as the merge's");
  if (o.shape.size() != 4)
    return;
  for (unsigned lse : {op::lse, op::lse_step})
    r.require(r.at(lse).shape ==
                  std::vector<int64_t>{o.shape[0], o.shape[2], o.shape[1]},
              "the log-sum-exp '" + r.at(lse).name +
                  "' must be one f32 per row of " + shapeText(o) +
                  " ([batch, heads, seq]), is " + shapeText(r.at(lse)));
}

/// Scores are [..., seq, keys]: a row per query, seq of them per head.
void checkSoftmaxFwd(Rules &r) {
  using namespace SoftmaxFwd;
  r.require(r.at(op::x).shape.size() >= 2,
            "softmax scores must be [..., seq, keys]");
  r.sameCount(op::x, op::y);
}
void checkSoftmaxBwd(Rules &r) {
  using namespace SoftmaxBwd;
  r.require(r.at(op::y).shape.size() >= 2,
            "softmax probabilities must be [..., seq, keys]");
  r.sameCount(op::y, op::dy);
  r.sameCount(op::y, op::dx);
}

void checkCrossEntropy(Rules &r, unsigned logits, unsigned labels,
                       int64_t vocab) {
  int64_t columns = r.lastDim(logits);
  r.require(r.at(logits).elements % columns == 0 &&
                r.at(logits).elements / columns == r.at(labels).elements,
            "the labels must be the logits without the vocabulary");
  r.vocabulary(vocab, 0, columns);
  r.require(vocab <= columns, "vocab_size " + std::to_string(vocab) +
                                  " is larger than the logits' " +
                                  std::to_string(columns) + " columns");
}
void checkCrossEntropyFwd(Rules &r) {
  using namespace CrossEntropyFwd;
  checkCrossEntropy(r, op::logits, op::labels, r.i(attr::vocab_size));
  r.scalar(op::loss);
}
void checkCrossEntropyBwd(Rules &r) {
  using namespace CrossEntropyBwd;
  checkCrossEntropy(r, op::logits, op::labels, r.i(attr::vocab_size));
  r.scalar(op::dloss);
  r.sameCount(op::logits, op::dlogits);
}
void checkCrossEntropyWithGrad(Rules &r) {
  using namespace CrossEntropyWithGrad;
  checkCrossEntropy(r, op::logits, op::labels, r.i(attr::vocab_size));
  r.scalar(op::dloss);
  r.scalar(op::loss);
  r.sameCount(op::logits, op::dlogits);
}

void checkSlice(Rules &r) {
  using namespace Slice;
  int64_t dim = r.i(attr::dim), part = r.i(attr::part),
          parts = r.i(attr::parts);
  const Buffer &x = r.at(op::x), &y = r.at(op::y);
  bool ok = dim >= 0 && dim < int64_t(x.shape.size()) && parts > 0 &&
            part >= 0 && part < parts && x.shape.size() == y.shape.size();
  for (size_t d = 0; ok && d < x.shape.size(); ++d)
    ok = int64_t(d) == dim
             ? x.shape[d] % parts == 0 && y.shape[d] == x.shape[d] / parts
             : x.shape[d] == y.shape[d];
  r.require(ok, "slice of " + shapeText(x) + " into " + shapeText(y) +
                    " does not fit its part");
}

/// The vocabulary-parallel kernels keep logits first and the two
/// vocabulary attributes at the same positions (the CPU kernels rely on it
/// too).
constexpr bool vocabularyAttrsAt(unsigned size, unsigned offset) {
  return size == LogitsMax::attr::vocab_size &&
         offset == LogitsMax::attr::vocab_offset;
}
static_assert(
    vocabularyAttrsAt(LogitsTarget::attr::vocab_size,
                      LogitsTarget::attr::vocab_offset) &&
    vocabularyAttrsAt(LogitsSumExp::attr::vocab_size,
                      LogitsSumExp::attr::vocab_offset) &&
    vocabularyAttrsAt(LogitsMaxSum::attr::vocab_size,
                      LogitsMaxSum::attr::vocab_offset) &&
    vocabularyAttrsAt(CrossEntropyGradFromStats::attr::vocab_size,
                      CrossEntropyGradFromStats::attr::vocab_offset) &&
    vocabularyAttrsAt(CrossEntropyWithGradFromStats::attr::vocab_size,
                      CrossEntropyWithGradFromStats::attr::vocab_offset));
void checkLogits(Rules &r) {
  using namespace LogitsMax;
  r.vocabulary(r.i(attr::vocab_size), r.i(attr::vocab_offset),
               r.lastDim(op::logits));
}
void checkLogitsMax(Rules &r) {
  checkLogits(r);
  r.perRow(LogitsMax::op::max, LogitsMax::op::logits);
}
void checkLogitsTarget(Rules &r) {
  using namespace LogitsTarget;
  checkLogits(r);
  r.perRow(op::labels, op::logits);
  r.perRow(op::target, op::logits);
}
void checkLogitsSumExp(Rules &r) {
  using namespace LogitsSumExp;
  checkLogits(r);
  r.perRow(op::max, op::logits);
  r.perRow(op::sum, op::logits);
}
void checkLogitsMaxSum(Rules &r) {
  using namespace LogitsMaxSum;
  checkLogits(r);
  r.perRow(op::max, op::logits);
  r.perRow(op::sum, op::logits);
}
void checkSumExpRescale(Rules &r) {
  using namespace SumExpRescale;
  for (unsigned row : {op::local_max, op::local_sum, op::max})
    r.sameCount(row, op::sum);
}
void checkCrossEntropyFromStats(Rules &r) {
  using namespace CrossEntropyFromStats;
  r.sameCount(op::max, op::sum);
  r.sameCount(op::max, op::target);
  r.scalar(op::loss);
}
void checkCrossEntropyGradFromStats(Rules &r) {
  using namespace CrossEntropyGradFromStats;
  checkLogits(r);
  for (unsigned row : {op::labels, op::max, op::sum})
    r.perRow(row, op::logits);
  r.scalar(op::dloss);
  r.sameCount(op::logits, op::dlogits);
}
void checkCrossEntropyWithGradFromStats(Rules &r) {
  using namespace CrossEntropyWithGradFromStats;
  checkLogits(r);
  for (unsigned row : {op::labels, op::max, op::sum, op::target})
    r.perRow(row, op::logits);
  r.scalar(op::dloss);
  r.scalar(op::loss);
  r.sameCount(op::logits, op::dlogits);
}

void checkSumSquares(Rules &r) {
  using namespace SumSquares;
  r.scalar(op::sum);
  int64_t elements = r.at(op::grads).elements;
  std::string what = "'" + r.at(op::grads).name + "'";
  r.segments(r.list(attr::segments), 2, elements, what);
  r.segments(r.list(attr::first_segments), 2, elements, what);
  r.windows(r.list(attr::windows), r.i(attr::part), elements, elements, what);
}

void checkClipCoefficient(Rules &r) {
  using namespace ClipCoefficient;
  for (unsigned s : {op::sum, op::norm, op::coefficient})
    r.scalar(s);
  r.hyper(op::hyper);
}

void checkAdamW(Rules &r) {
  using namespace AdamW;
  r.scalar(op::coefficient);
  r.hyper(op::hyper);
  r.sameCount(op::grads, op::params);
  r.sameCount(op::exp_avg, op::exp_avg_sq);
  if (r.has(op::master))
    r.sameCount(op::exp_avg, op::master);
  else
    r.require(r.at(op::params).dtype == DType::F32,
              "bf16 parameters need an f32 master");
  const std::vector<int64_t> &segments = r.list(attr::segments);
  std::string what = "'" + r.at(op::grads).name + "'";
  r.segments(segments, 3, r.at(op::grads).elements, what);
  bool decays = true;
  for (size_t s = 0; s + 2 < segments.size(); s += 3)
    decays = decays && (segments[s + 2] == 0 || segments[s + 2] == 1);
  r.require(decays, "adamw segments must have decay 0 or 1");
  r.windows(r.list(attr::windows), r.i(attr::part), r.at(op::grads).elements,
            r.at(op::exp_avg).elements, what);
}

bool dtypeFits(DTypes allowed, DType dtype) {
  switch (allowed) {
  case DTypes::Float:
    return dtype == DType::F32 || dtype == DType::BF16;
  case DTypes::F32:
    return dtype == DType::F32;
  case DTypes::I32:
    return dtype == DType::I32;
  }
  return false;
}

const char *dtypesName(DTypes allowed) {
  switch (allowed) {
  case DTypes::Float:
    return "a float buffer";
  case DTypes::F32:
    return "f32";
  case DTypes::I32:
    return "i32 ids";
  }
  return "?";
}

} // namespace

std::string checkLaunch(const LaunchOp &launch,
                        const std::vector<Buffer> &buffers,
                        const CheckContext &context) {
  const KernelSpec &spec = kernelSpec(launch.kernel);
  std::string name = spec.name;
  if (launch.operands.size() != spec.operands.size())
    return name + " takes " + std::to_string(spec.operands.size()) +
           " operands, the plan gives " +
           std::to_string(launch.operands.size());
  for (size_t o = 0; o < spec.operands.size(); ++o) {
    const OperandSpec &operand = spec.operands[o];
    uint32_t index = launch.operands[o];
    if (index == kNoBuffer) {
      if (!operand.optional)
        return name + ": operand '" + operand.name + "' is missing";
      continue;
    }
    if (index >= buffers.size())
      return name + ": operand '" + operand.name + "' names buffer " +
             std::to_string(index) + " of " + std::to_string(buffers.size());
    const Buffer &b = buffers[index];
    if (!dtypeFits(operand.dtypes, b.dtype))
      return name + ": '" + b.name + "' (" + operand.name + ") must be " +
             dtypesName(operand.dtypes) + ", is " + shapeText(b);
  }
  if (launch.attrs.size() != spec.attrs.size())
    return name + " takes " + std::to_string(spec.attrs.size()) +
           " attributes, the plan gives " + std::to_string(launch.attrs.size());
  for (size_t a = 0; a < spec.attrs.size(); ++a) {
    const AttrValue &value = launch.attrs[a];
    bool ok = true;
    switch (spec.attrs[a].kind) {
    case AttrKind::Bool:
      ok = value.i == 0 || value.i == 1;
      break;
    case AttrKind::Float:
      ok = std::isfinite(value.f);
      break;
    case AttrKind::Int:
      // An offset, a count, a part: within a buffer's extent, so that the
      // shape rules' sums cannot wrap.
      ok = value.i >= -kMaxDim && value.i <= kMaxDim;
      break;
    case AttrKind::Ints:
      break;
    }
    if (!ok)
      return name + ": attribute '" + spec.attrs[a].name + "' has a bad value";
  }
  Rules rules(launch, buffers, context);
  switch (launch.kernel) {
#define KERNEL(Name, text)                                                     \
  case KernelId::Name:                                                         \
    check##Name(rules);                                                        \
    break;
#include "runtime/plan/Kernels.def"
  case KernelId::Count:
    break;
  }
  return rules.error.empty() ? "" : name + ": " + rules.error;
}

} // namespace strata::runtime
