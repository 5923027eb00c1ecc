//===- KernelsAttentionTest.cpp
//---------------------------------------------===//
//
// Rope and attention (grouped-query, causal, bf16, tensor cores); each against
// its float64 reference on every device (KernelTesting.h). cuDNN's fused
// attention (strata-run --attention-backend cudnn) against the same
// references, and against strata's kernels at the benchmark's shapes, on a
// GPU with cuDNN.
//
//===----------------------------------------------------------------------===//
#include "KernelTesting.h"

using namespace strata::kernel_testing;

namespace {

TEST_P(Kernels, RopeAndItsInverse) {
  // Head dimension 8 (a GPU rotates one pair at a time) and 32 (8 pairs a
  // thread, 16-byte loads), positions up to 19.
  for (auto [b, s, heads, d] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t>{2, 7, 3, 8},
        {1, 20, 2, 32}}) {
    Vec x = randomVec(b * s * heads * d);
    for (bool inverse : {false, true}) {
      Harness h(on());
      uint32_t ix = h.input({b, s, heads, d}, x), out = h.add({b, s, heads, d});
      h.run("rope", {ix}, {out},
            {{"base", floatArg(10000.0)}, {"inverse", boolArg(inverse)}});
      expectClose(h.read(out), refRope(x, b, s, heads, d, 10000.0, inverse),
                  kTol, "rope");
      // The inverse rotation is the forward rotation's gradient.
      if (inverse)
        expectClose(h.read(out),
                    vjp(
                        [&](const Vec &v) {
                          return refRope(v, b, s, heads, d, 10000.0, false);
                        },
                        Vec(x.size(), 0.0), x),
                    kTol, "rope gradient");
    }
  }
}

TEST_P(Kernels, AttentionGroupedQueryCausalAndNot) {
  for (bool causal : {true, false}) {
    AttnDims a{2, 6, 4, 2, 4, causal};
    Vec q = randomVec(a.b * a.s * a.h * a.d),
        k = randomVec(a.b * a.s * a.kv * a.d),
        v = randomVec(a.b * a.s * a.kv * a.d), dout = randomVec(q.size());
    std::map<std::string, Arg> args = {{"causal", boolArg(causal)},
                                       {"group_size", intArg(a.h / a.kv)}};
    Harness h(on());
    uint32_t iq = h.input({a.b, a.s, a.h, a.d}, q),
             ik = h.input({a.b, a.s, a.kv, a.d}, k),
             iv = h.input({a.b, a.s, a.kv, a.d}, v),
             out = h.add({a.b, a.s, a.h, a.d}), lse = h.add({a.b, a.h, a.s});
    h.run("attention_fwd", {iq, ik, iv}, {out, lse}, args);
    Vec expectedLse;
    Vec o = refAttention(a, q, k, v, &expectedLse);
    expectClose(h.read(out), o, kTol, "attention_fwd");
    expectClose(h.read(lse), expectedLse, kTol, "attention_fwd log-sum-exp");

    // The backward takes the forward's log-sum-exp.
    Harness g(on());
    uint32_t gq = g.input({a.b, a.s, a.h, a.d}, q),
             gk = g.input({a.b, a.s, a.kv, a.d}, k),
             gv = g.input({a.b, a.s, a.kv, a.d}, v),
             go = g.input({a.b, a.s, a.h, a.d}, o),
             glse = g.input({a.b, a.h, a.s}, h.read(lse)),
             gdo = g.input({a.b, a.s, a.h, a.d}, dout);
    uint32_t dq = g.add({a.b, a.s, a.h, a.d}),
             dk = g.add({a.b, a.s, a.kv, a.d}),
             dv = g.add({a.b, a.s, a.kv, a.d});
    g.run("attention_bwd", {gq, gk, gv, go, glse, gdo}, {dq, dk, dv}, args);
    expectClose(
        g.read(dq),
        vjp([&](const Vec &x) { return refAttention(a, x, k, v); }, q, dout),
        kTol, "query gradient");
    expectClose(
        g.read(dk),
        vjp([&](const Vec &x) { return refAttention(a, q, x, v); }, k, dout),
        kTol, "key gradient");
    expectClose(
        g.read(dv),
        vjp([&](const Vec &x) { return refAttention(a, q, k, x); }, v, dout),
        kTol, "value gradient");
  }
}

/// Rank `rank`'s log-sum-exps, [b, heads, rows], of the whole sequence's,
/// [b, heads, s]: each head's rows at the rank's two chunks.
Vec contextLse(const Vec &whole, const AttnDims &a, int64_t c, int64_t rank) {
  int64_t rows = a.s / c;
  Vec bySeq(whole.size()); // [b, s, heads], rows of the sequence
  for (int64_t bi = 0; bi < a.b; ++bi)
    for (int64_t h = 0; h < a.h; ++h)
      for (int64_t i = 0; i < a.s; ++i)
        bySeq[(bi * a.s + i) * a.h + h] = whole[(bi * a.h + h) * a.s + i];
  Vec mine = contextRows(bySeq, a.b, a.s, a.h, c, rank), out(mine.size());
  for (int64_t bi = 0; bi < a.b; ++bi)
    for (int64_t h = 0; h < a.h; ++h)
      for (int64_t i = 0; i < rows; ++i)
        out[(bi * a.h + h) * rows + i] = mine[(bi * rows + i) * a.h + h];
  return out;
}

/// `whole` ([b, s, inner]) at rank `rank`'s rows, zero at the others': the
/// gradient flowing into its rows only.
Vec atContextRowsOnly(const Vec &whole, int64_t b, int64_t s, int64_t inner,
                      int64_t c, int64_t rank) {
  int64_t rows = s / c;
  Vec out(whole.size(), 0.0);
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t l = 0; l < rows; ++l) {
      int64_t place = strata::runtime::contextPosition(l, rows, c, rank);
      std::copy_n(whole.begin() + (bi * s + place) * inner, inner,
                  out.begin() + (bi * s + place) * inner);
    }
  return out;
}

// Context parallelism: a rank's queries are two chunks of the sequence
// (rank i: chunks i and 2c - 1 - i) and its keys every rank's, gathered in
// rank order. Its output, log-sum-exp and query gradient are the
// whole-sequence reference's at its rows; its gradients of the gathered
// keys and values are the whole reference's for a gradient flowing into
// its rows only (what the reduce-scatter over the ranks then sums). Rope
// at a rank's rows turns them by their places in the sequence. Causal and
// not, grouped-query, c = 2 and 3, every rank.
TEST_P(Kernels, AttentionAndRopeOverAContextParallelRanksChunks) {
  for (auto [c, causal] :
       {std::pair<int64_t, bool>{2, true}, {3, true}, {2, false}}) {
    AttnDims a{2, 4 * c, 4, 2, 4, causal}; // two chunks of 2 a rank
    int64_t rows = a.s / c, qInner = a.h * a.d, kvInner = a.kv * a.d;
    Vec q = randomVec(a.b * a.s * qInner), k = randomVec(a.b * a.s * kvInner),
        v = randomVec(a.b * a.s * kvInner), dout = randomVec(q.size());
    Vec wholeLse;
    Vec o = refAttention(a, q, k, v, &wholeLse);
    Vec kAll = contextGathered(k, a.b, a.s, kvInner, c),
        vAll = contextGathered(v, a.b, a.s, kvInner, c);
    for (int64_t rank = 0; rank < c; ++rank) {
      std::map<std::string, Arg> args = {{"causal", boolArg(causal)},
                                         {"group_size", intArg(a.h / a.kv)},
                                         {"context_parallel", intArg(c)},
                                         {"context_rank", intArg(rank)}};
      Vec qPart = contextRows(q, a.b, a.s, qInner, c, rank);
      Vec lsePart = contextLse(wholeLse, a, c, rank);
      Harness h(on());
      uint32_t iq = h.input({a.b, rows, a.h, a.d}, qPart),
               ik = h.input({a.b, a.s, a.kv, a.d}, kAll),
               iv = h.input({a.b, a.s, a.kv, a.d}, vAll),
               out = h.add({a.b, rows, a.h, a.d}),
               lse = h.add({a.b, a.h, rows});
      h.run("attention_fwd", {iq, ik, iv}, {out, lse}, args);
      expectClose(h.read(out), contextRows(o, a.b, a.s, qInner, c, rank), kTol,
                  "context-parallel attention_fwd");
      expectClose(h.read(lse), lsePart, kTol,
                  "context-parallel attention_fwd log-sum-exp");

      Vec doutMine = atContextRowsOnly(dout, a.b, a.s, qInner, c, rank);
      Harness g(on());
      uint32_t gq = g.input({a.b, rows, a.h, a.d}, qPart),
               gk = g.input({a.b, a.s, a.kv, a.d}, kAll),
               gv = g.input({a.b, a.s, a.kv, a.d}, vAll),
               go = g.input({a.b, rows, a.h, a.d},
                            contextRows(o, a.b, a.s, qInner, c, rank)),
               glse = g.input({a.b, a.h, rows}, lsePart),
               gdo = g.input({a.b, rows, a.h, a.d},
                             contextRows(dout, a.b, a.s, qInner, c, rank));
      uint32_t dq = g.add({a.b, rows, a.h, a.d}),
               dk = g.add({a.b, a.s, a.kv, a.d}),
               dv = g.add({a.b, a.s, a.kv, a.d});
      g.run("attention_bwd", {gq, gk, gv, go, glse, gdo}, {dq, dk, dv}, args);
      Vec dqWhole = vjp([&](const Vec &x) { return refAttention(a, x, k, v); },
                        q, doutMine);
      expectClose(g.read(dq), contextRows(dqWhole, a.b, a.s, qInner, c, rank),
                  kTol, "context-parallel query gradient");
      expectClose(
          g.read(dk),
          contextGathered(
              vjp([&](const Vec &x) { return refAttention(a, q, x, v); }, k,
                  doutMine),
              a.b, a.s, kvInner, c),
          kTol, "context-parallel key gradient");
      expectClose(
          g.read(dv),
          contextGathered(
              vjp([&](const Vec &x) { return refAttention(a, q, k, x); }, v,
                  doutMine),
              a.b, a.s, kvInner, c),
          kTol, "context-parallel value gradient");

      // Rope at the rank's rows.
      for (bool inverse : {false, true}) {
        Harness r(on());
        uint32_t ix = r.input({a.b, rows, a.h, a.d}, qPart),
                 ry = r.add({a.b, rows, a.h, a.d});
        r.run("rope", {ix}, {ry},
              {{"base", floatArg(10000.0)},
               {"inverse", boolArg(inverse)},
               {"context_parallel", intArg(c)},
               {"context_rank", intArg(rank)}});
        expectClose(
            r.read(ry),
            contextRows(refRope(q, a.b, a.s, a.h, a.d, 10000.0, inverse), a.b,
                        a.s, qInner, c, rank),
            kTol, "context-parallel rope");
      }
    }
  }
}

/// Log-sum-exps that may be −∞ (rows that saw no key) against expected
/// ones: −∞ exactly where expected, the others within `tolerance`.
void expectLse(const Vec &actual, const Vec &expected, const char *what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  Vec finiteActual = actual, finiteExpected = expected;
  for (size_t i = 0; i < expected.size(); ++i) {
    bool none = expected[i] == -INFINITY;
    EXPECT_EQ(actual[i] == -INFINITY, none)
        << what << ": row " << i << " is " << actual[i] << ", expected "
        << expected[i];
    if (none)
      finiteActual[i] = finiteExpected[i] = 0;
  }
  expectClose(finiteActual, finiteExpected, kTol, what);
}

// The ring's merge of one step's attention into the steps' so far, against
// the formula in double, with rows where either or both have seen no key
// (lse −∞).
TEST_P(Kernels, AttentionMergeByLogSumExp) {
  const int64_t b = 2, s = 5, heads = 3, d = 40; // d past a warp's lanes
  const std::vector<int64_t> oShape = {b, s, heads, d},
                             lseShape = {b, heads, s};
  Vec o = randomVec(b * s * heads * d), oStep = randomVec(o.size());
  Vec lse = randomVec(b * heads * s, 3.0), lseStep = randomVec(lse.size(), 3.0);
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t h = 0; h < heads; ++h) {
      int64_t row = (bi * heads + h) * s;
      lse[row + 0] = -INFINITY;     // only the step has seen keys
      lseStep[row + 1] = -INFINITY; // only the merge so far
      lse[row + 2] = lseStep[row + 2] = -INFINITY; // neither
    }
  // Rows that saw nothing hold o = 0 (attention_fwd's, and the merge's).
  Vec oSoFar = o, oOfStep = oStep;
  Vec expectedO(o.size()), expectedLse(lse.size());
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < s; ++i) {
        int64_t r = (bi * heads + h) * s + i;
        double la = lse[r], lb = lseStep[r], m = std::max(la, lb);
        for (int64_t x = 0; x < d; ++x) {
          int64_t e = ((bi * s + i) * heads + h) * d + x;
          if (la == -INFINITY)
            oSoFar[e] = 0;
          if (lb == -INFINITY)
            oOfStep[e] = 0;
        }
        if (m == -INFINITY) {
          expectedLse[r] = -INFINITY;
          continue; // expectedO stays 0
        }
        double wa = std::exp(la - m), wb = std::exp(lb - m);
        expectedLse[r] = m + std::log(wa + wb);
        for (int64_t x = 0; x < d; ++x) {
          int64_t e = ((bi * s + i) * heads + h) * d + x;
          expectedO[e] = (wa * oSoFar[e] + wb * oOfStep[e]) / (wa + wb);
        }
      }
  Harness h(on());
  uint32_t io = h.add(oShape), ilse = h.add(lseShape);
  h.presetOutput(io, oSoFar);
  h.presetOutput(ilse, lse);
  h.run("attention_merge",
        {h.input(oShape, oOfStep), h.input(lseShape, lseStep)}, {io, ilse});
  expectClose(h.read(io), expectedO, kTol, "attention_merge output");
  expectLse(h.read(ilse), expectedLse, "attention_merge log-sum-exp");
}

// The ring (--cp-comm-type p2p): rank i's queries against one rank's keys
// a step, rank (i − s) mod c's at step s, each step merged into the last
// by attention_merge, give the whole-sequence reference's rows; a step
// whose keys all lie after a row leaves it o = 0, lse = −∞. Backward, each
// step with the merged output and log-sum-exp: the steps' query gradients
// sum to the whole reference's, and each step's key and value gradients
// are the reference's for that rank's keys from this rank's rows. Causal
// and not, grouped-query, c = 2 and 3, every rank.
TEST_P(Kernels, RingAttentionStepsMergeToTheWholeSequence) {
  for (auto [c, causal] :
       {std::pair<int64_t, bool>{2, true}, {3, true}, {2, false}}) {
    AttnDims a{2, 4 * c, 4, 2, 4, causal}; // two chunks of 2 a rank
    int64_t rows = a.s / c, qInner = a.h * a.d, kvInner = a.kv * a.d;
    Vec q = randomVec(a.b * a.s * qInner), k = randomVec(a.b * a.s * kvInner),
        v = randomVec(a.b * a.s * kvInner), dout = randomVec(q.size());
    Vec wholeLse;
    Vec o = refAttention(a, q, k, v, &wholeLse);
    const std::vector<int64_t> qShape = {a.b, rows, a.h, a.d},
                               kvShape = {a.b, rows, a.kv, a.d},
                               lseShape = {a.b, a.h, rows};
    for (int64_t rank = 0; rank < c; ++rank) {
      SCOPED_TRACE("c " + std::to_string(c) + " rank " + std::to_string(rank) +
                   (causal ? " causal" : ""));
      Vec qPart = contextRows(q, a.b, a.s, qInner, c, rank);
      Vec oPart = contextRows(o, a.b, a.s, qInner, c, rank);
      Vec lsePart = contextLse(wholeLse, a, c, rank);
      Vec doutPart = contextRows(dout, a.b, a.s, qInner, c, rank);
      Vec doutMine = atContextRowsOnly(dout, a.b, a.s, qInner, c, rank);
      Vec dqWhole = vjp([&](const Vec &x) { return refAttention(a, x, k, v); },
                        q, doutMine),
          dkWhole = vjp([&](const Vec &x) { return refAttention(a, q, x, v); },
                        k, doutMine),
          dvWhole = vjp([&](const Vec &x) { return refAttention(a, q, k, x); },
                        v, doutMine);
      Vec merged, mergedLse, dqSum(qPart.size(), 0.0);
      for (int64_t step = 0; step < c; ++step) {
        int64_t from = strata::runtime::ringKeyRank(rank, step, c);
        Vec kPart = contextRows(k, a.b, a.s, kvInner, c, from),
            vPart = contextRows(v, a.b, a.s, kvInner, c, from);
        std::map<std::string, Arg> args = {{"causal", boolArg(causal)},
                                           {"group_size", intArg(a.h / a.kv)},
                                           {"context_parallel", intArg(c)},
                                           {"context_rank", intArg(rank)},
                                           {"ring_step", intArg(step)}};
        Harness f(on());
        uint32_t out = f.add(qShape), lse = f.add(lseShape);
        f.run("attention_fwd",
              {f.input(qShape, qPart), f.input(kvShape, kPart),
               f.input(kvShape, vPart)},
              {out, lse}, args);
        Vec oStep = f.read(out), lseStep = f.read(lse);
        // Causal: a later rank's keys are all after the first chunk's
        // rows (chunk `rank`): those rows see none of them.
        if (causal && from > rank)
          for (int64_t bi = 0; bi < a.b; ++bi)
            for (int64_t h = 0; h < a.h; ++h)
              for (int64_t l = 0; l < rows / 2; ++l) {
                EXPECT_EQ(lseStep[(bi * a.h + h) * rows + l], -INFINITY);
                for (int64_t x = 0; x < a.d; ++x)
                  EXPECT_EQ(oStep[((bi * rows + l) * a.h + h) * a.d + x], 0.0);
              }
        if (step == 0) {
          merged = oStep;
          mergedLse = lseStep;
        } else {
          Harness m(on());
          uint32_t mo = m.add(qShape), mlse = m.add(lseShape);
          m.presetOutput(mo, merged);
          m.presetOutput(mlse, mergedLse);
          m.run("attention_merge",
                {m.input(qShape, oStep), m.input(lseShape, lseStep)},
                {mo, mlse});
          merged = m.read(mo);
          mergedLse = m.read(mlse);
        }

        Harness g(on());
        uint32_t dq = g.add(qShape), dk = g.add(kvShape), dv = g.add(kvShape);
        g.run("attention_bwd",
              {g.input(qShape, qPart), g.input(kvShape, kPart),
               g.input(kvShape, vPart), g.input(qShape, oPart),
               g.input(lseShape, lsePart), g.input(qShape, doutPart)},
              {dq, dk, dv}, args);
        Vec dqStep = g.read(dq);
        for (size_t e = 0; e < dqSum.size(); ++e)
          dqSum[e] += dqStep[e];
        expectClose(g.read(dk),
                    contextRows(dkWhole, a.b, a.s, kvInner, c, from), kTol,
                    "ring step's key gradient");
        expectClose(g.read(dv),
                    contextRows(dvWhole, a.b, a.s, kvInner, c, from), kTol,
                    "ring step's value gradient");
      }
      expectClose(merged, oPart, kTol, "ring attention, merged");
      expectLse(mergedLse, lsePart, "ring attention's log-sum-exp, merged");
      expectClose(dqSum, contextRows(dqWhole, a.b, a.s, qInner, c, rank), kTol,
                  "ring attention's query gradient, summed over steps");
    }
  }
}

/// Softmax over rows of [..., seq, keys], causal masking keys after the
/// row's query (its index mod seq).
Vec refSoftmax(const Vec &x, int64_t seq, int64_t keys, bool causal) {
  Vec y(x.size(), 0.0);
  for (size_t r = 0; r < x.size() / keys; ++r) {
    int64_t valid =
        causal ? std::min<int64_t>(keys, int64_t(r) % seq + 1) : keys;
    double max = -INFINITY, sum = 0;
    for (int64_t j = 0; j < valid; ++j)
      max = std::max(max, x[r * keys + j]);
    for (int64_t j = 0; j < valid; ++j)
      sum += std::exp(x[r * keys + j] - max);
    for (int64_t j = 0; j < valid; ++j)
      y[r * keys + j] = std::exp(x[r * keys + j] - max) / sum;
  }
  return y;
}

// The unfused backend's probabilities and their gradient, f32 and bf16,
// causal and not; the gradient against the reference's vector-Jacobian
// product.
TEST_P(Kernels, SoftmaxCausalAndNot) {
  // Rows of 5 and 37 keys (one at a time on a GPU) and of 72 and 264 (in
  // 16-byte chunks of 8, rows wider than a warp's 32 lanes).
  for (DType dtype : {DType::F32, DType::BF16})
    for (auto [causal, s, keys] :
         {std::tuple<bool, int64_t, int64_t>{true, 5, 5},
          {false, 5, 37},
          {true, 72, 72},
          {false, 6, 264}}) {
      // One head of one sample for the wide rows: the gradient's reference
      // takes central differences, a softmax per element.
      const int64_t b = keys > 40 ? 1 : 2, h = keys > 40 ? 1 : 3;
      std::vector<int64_t> shape = {b, h, s, keys};
      Vec x = randomVec(b * h * s * keys), dy = randomVec(x.size());
      double tol = dtype == DType::BF16 ? kTolBf16 : kTol;
      if (dtype == DType::BF16) {
        x = roundedToBf16(x);
        dy = roundedToBf16(dy);
      }
      Harness f(on());
      uint32_t out = f.add(shape, dtype);
      f.run("softmax_fwd", {f.input(shape, x, dtype)}, {out},
            {{"causal", boolArg(causal)}});
      Vec y = refSoftmax(x, s, keys, causal);
      expectClose(f.read(out), y, tol, "softmax_fwd");

      Harness g(on());
      Vec yRounded = dtype == DType::BF16 ? roundedToBf16(y) : y;
      uint32_t dx = g.add(shape, dtype);
      g.run("softmax_bwd",
            {g.input(shape, yRounded, dtype), g.input(shape, dy, dtype)}, {dx},
            {});
      expectClose(
          g.read(dx),
          vjp([&](const Vec &v) { return refSoftmax(v, s, keys, causal); }, x,
              dy),
          tol, "softmax_bwd");
    }
}

/// Attention's backward as the tensor-core kernels compute it
/// (compiler/codegen/EmitAttentionMma.cpp), in double otherwise: P
/// recomputed from the forward's log-sum-exp, D = rowsum(dO ⊙ O) from the
/// output as stored, and P (for dV = Pᵀ·dO) and dS = P ⊙ (dP − D) (for
/// dQ = scale·dS·K and dK = scale·dSᵀ·Q) rounded to bf16 as those products'
/// operands. Their exact gradients differ from these by the sum of many
/// bf16 roundings of dS (over 1% of the largest gradient for some inputs),
/// which is the algorithm's, as in flash attention; the kernel is held to
/// this. Queries and keys at places `at`, as refAttentionAt's. Returns dq,
/// dk, dv.
std::array<Vec, 3>
refAttentionBwdOnTensorCores(const AttnDims &a, const RowPlaces &at,
                             const Vec &q, const Vec &k, const Vec &v,
                             const Vec &o, const Vec &lse, const Vec &dout) {
  const int64_t n = at.queries.size(), m = at.keys.size();
  Vec dq(q.size(), 0.0), dk(k.size(), 0.0), dv(v.size(), 0.0);
  const double scale = 1 / std::sqrt(double(a.d));
  auto qAt = [&](int64_t bi, int64_t row, int64_t head) {
    return ((bi * n + row) * a.h + head) * a.d;
  };
  auto kvAt = [&](int64_t bi, int64_t row, int64_t head) {
    return ((bi * m + row) * a.kv + head) * a.d;
  };
  for (int64_t bi = 0; bi < a.b; ++bi)
    for (int64_t h = 0; h < a.h; ++h) {
      int64_t g = (a.offset + h) / a.groupSize();
      for (int64_t i = 0; i < n; ++i) {
        const double *qi = &q[qAt(bi, i, h)], *oi = &o[qAt(bi, i, h)],
                     *doi = &dout[qAt(bi, i, h)];
        double rowLse = float(lse[(bi * a.h + h) * n + i]); // stored f32
        double dRow = 0;
        for (int64_t x = 0; x < a.d; ++x)
          dRow += doi[x] * oi[x];
        for (int64_t j = 0; j < m; ++j) {
          if (a.causal && at.keys[j] > at.queries[i])
            continue;
          const double *kj = &k[kvAt(bi, j, g)], *vj = &v[kvAt(bi, j, g)];
          double score = 0, dp = 0;
          for (int64_t x = 0; x < a.d; ++x) {
            score += qi[x] * kj[x];
            dp += doi[x] * vj[x];
          }
          double p = std::exp(score * scale - rowLse);
          double pRounded = roundToBf16(float(p));
          double ds = roundToBf16(float(p * (dp - dRow)));
          for (int64_t x = 0; x < a.d; ++x) {
            dv[kvAt(bi, j, g) + x] += pRounded * doi[x];
            dq[qAt(bi, i, h) + x] += scale * ds * kj[x];
            dk[kvAt(bi, j, g) + x] += scale * ds * qi[x];
          }
        }
      }
    }
  return {dq, dk, dv};
}
std::array<Vec, 3> refAttentionBwdOnTensorCores(const AttnDims &a, const Vec &q,
                                                const Vec &k, const Vec &v,
                                                const Vec &o, const Vec &lse,
                                                const Vec &dout) {
  return refAttentionBwdOnTensorCores(a, wholeSequence(a.s), q, k, v, o, lse,
                                      dout);
}

/// The tensor-core kernels' gradients against refAttentionBwdOnTensorCores:
/// within their own rounding (2^-9 of the largest) and a P or dS that
/// rounds the other way from f32 than from double.
constexpr double kTolOnTensorCores = 4e-3;

/// One bf16 attention launch on `device` and what it wrote: the forward's
/// output and log-sum-exp, or the backward's dQ, dK and dV; `library` is
/// who ran it (Backend::launchLibrary: "cudnn", or "" for the kernel).
struct AttentionRun {
  std::vector<Vec> outputs;
  std::string library;
};
std::map<std::string, Arg> attentionArgs(const AttnDims &a) {
  return {{"causal", boolArg(a.causal)},
          {"group_size", intArg(a.groupSize())},
          {"query_head_offset", intArg(a.offset)}};
}
AttentionRun runAttentionFwd(const Device &device, const AttnDims &a,
                             const Vec &q, const Vec &k, const Vec &v) {
  const DType bf16 = DType::BF16;
  const std::vector<int64_t> qShape = {a.b, a.s, a.h, a.d},
                             kvShape = {a.b, a.s, a.kv, a.d};
  Harness h(device);
  uint32_t out = h.add(qShape, bf16), lse = h.add({a.b, a.h, a.s});
  h.run("attention_fwd",
        {h.input(qShape, q, bf16), h.input(kvShape, k, bf16),
         h.input(kvShape, v, bf16)},
        {out, lse}, attentionArgs(a));
  return {{h.read(out), h.read(lse)}, h.library()};
}
AttentionRun runAttentionBwd(const Device &device, const AttnDims &a,
                             const Vec &q, const Vec &k, const Vec &v,
                             const Vec &o, const Vec &lse, const Vec &dout,
                             DType gradients) {
  const DType bf16 = DType::BF16;
  const std::vector<int64_t> qShape = {a.b, a.s, a.h, a.d},
                             kvShape = {a.b, a.s, a.kv, a.d};
  Harness g(device);
  uint32_t dq = g.add(qShape, gradients), dk = g.add(kvShape, gradients),
           dv = g.add(kvShape, gradients);
  g.run("attention_bwd",
        {g.input(qShape, q, bf16), g.input(kvShape, k, bf16),
         g.input(kvShape, v, bf16), g.input(qShape, o, bf16),
         g.input({a.b, a.h, a.s}, lse), g.input(qShape, dout, bf16)},
        {dq, dk, dv}, attentionArgs(a));
  return {{g.read(dq), g.read(dk), g.read(dv)}, g.library()};
}

/// bf16 attention forward and backward of shape `a` on `device` (random
/// bf16 inputs) against float64: outputs within 1e-2, the log-sum-exp
/// (f32) within 1e-5; the gradients stored as `gradients`.
void expectBf16Attention(const Device &device, const AttnDims &a,
                         DType gradients) {
  Vec q = roundedToBf16(randomVec(a.b * a.s * a.h * a.d)),
      k = roundedToBf16(randomVec(a.b * a.s * a.kv * a.d)),
      v = roundedToBf16(randomVec(a.b * a.s * a.kv * a.d)),
      dout = roundedToBf16(randomVec(q.size()));
  Vec lse;
  Vec o = refAttention(a, q, k, v, &lse);
  const std::string library = throughCudnn(device) ? "cudnn" : "";
  AttentionRun forward = runAttentionFwd(device, a, q, k, v);
  EXPECT_EQ(forward.library, library) << "who ran the forward";
  expectClose(forward.outputs[0], o, kTolBf16, "attention_fwd");
  expectClose(forward.outputs[1], lse, kTol, "attention_fwd log-sum-exp");

  AttentionRun backward = runAttentionBwd(device, a, q, k, v, roundedToBf16(o),
                                          lse, dout, gradients);
  EXPECT_EQ(backward.library, library) << "who ran the backward";
  const Vec &dq = backward.outputs[0], &dk = backward.outputs[1],
            &dv = backward.outputs[2];
  if (device != "cpu") {
    // The tensor-core kernels (simt runs the generated ones): against what
    // they compute.
    auto [refQ, refK, refV] =
        refAttentionBwdOnTensorCores(a, q, k, v, roundedToBf16(o), lse, dout);
    expectClose(dq, refQ, kTolOnTensorCores, "query gradient");
    expectClose(dk, refK, kTolOnTensorCores, "key gradient");
    expectClose(dv, refV, kTolOnTensorCores, "value gradient");
    return;
  }
  // The CPU's: f32 throughout, against the exact gradients.
  expectClose(
      dq, vjp([&](const Vec &x) { return refAttention(a, x, k, v); }, q, dout),
      kTolBf16, "query gradient");
  expectClose(
      dk, vjp([&](const Vec &x) { return refAttention(a, q, x, v); }, k, dout),
      kTolBf16, "key gradient");
  expectClose(
      dv, vjp([&](const Vec &x) { return refAttention(a, q, k, x); }, v, dout),
      kTolBf16, "value gradient");
}

TEST_P(Kernels, Bf16AttentionAndLoss) {
  const DType bf16 = DType::BF16;
  expectBf16Attention(on(), {1, 16, 4, 2, 16, true}, bf16);

  const int64_t tokens = 12, vocab = 40;
  Vec logits = roundedToBf16(randomVec(tokens * vocab, 2.0));
  auto labels = randomIds(tokens, vocab);
  Harness l(on());
  uint32_t loss = l.add({});
  l.run("cross_entropy_fwd",
        {l.input({tokens, vocab}, logits, bf16), l.ids({tokens}, labels)},
        {loss}, {{"vocab_size", intArg(vocab)}});
  // The loss is f32: from the bf16 logits, only f32's rounding.
  expectClose(l.read(loss), {refCrossEntropy(logits, labels, vocab)}, kTol,
              "bf16 cross_entropy_fwd");
  Harness lg(on());
  uint32_t grad = lg.add({tokens, vocab}, bf16);
  lg.run("cross_entropy_bwd",
         {lg.input({tokens, vocab}, logits, bf16), lg.ids({tokens}, labels),
          lg.input({}, {1.0})},
         {grad}, {{"vocab_size", intArg(vocab)}});
  // The gradient's entries are O(1/tokens): relative to its largest.
  Vec expected =
      vjp([&](const Vec &z) { return Vec{refCrossEntropy(z, labels, vocab)}; },
          logits, {1.0});
  double largest = 0;
  for (double e : expected)
    largest = std::max(largest, std::fabs(e));
  expectClose(lg.read(grad), expected, kTolBf16 * largest,
              "bf16 cross_entropy_bwd");
}

TEST_P(Kernels, Bf16AttentionOnTensorCoresAcrossTilesAndShapes) {
  // bf16 attention runs on tensor cores (mma.sync): blocks of 64 query
  // rows, tiles of 32 keys. Shapes that cross both with partial ones, a
  // head dimension that is a multiple of 8 but not of 16 (padded for the
  // products over it), 64, grouped queries with a first query head past 0,
  // causal and not. The output gradients are f32 and bf16.
  const DType bf16 = DType::BF16;
  struct Case {
    AttnDims a;
    DType gradients;
  };
  for (const Case &c : {Case{{1, 70, 2, 1, 24, true}, DType::F32},
                        Case{{1, 70, 2, 1, 24, false}, bf16},
                        Case{{2, 33, 3, 2, 8, true, 2, 1}, bf16},
                        Case{{1, 40, 1, 1, 64, true}, DType::F32}}) {
    SCOPED_TRACE("s " + std::to_string(c.a.s) + " d " + std::to_string(c.a.d) +
                 (c.a.causal ? " causal" : ""));
    expectBf16Attention(on(), c.a, c.gradients);
  }
}

TEST_P(Kernels, Bf16AttentionAcrossQueryBlocksAndKeyStages) {
  // The forward's blocks of 128 query rows (8 warps of 16) walk key tiles
  // of 64 through shared stages (three up to head dimension 64, two past
  // it): sequences that span several blocks and more tiles than stages,
  // with ragged ends; head dimensions 64, 128 and one padded to 48; causal
  // (only diagonal tiles masked) and not; grouped queries from an offset.
  // The backward's blocks of 128 keys add their parts of a query tile's dQ
  // in a fixed order (several blocks at s 150 and more), and the tile's
  // first adder computes D for the others; each case runs twice, the second
  // time on the same loaded kernel, whose flags the first must have left at
  // zero. The CPU's kernel has no tiles, and
  // its exact gradients (central differences) at these sizes take minutes: the
  // generated kernels only.
  if (on() == "cpu")
    GTEST_SKIP() << "the tiles are the generated kernels'";
  const DType bf16 = DType::BF16;
  struct Case {
    AttnDims a;
    DType gradients;
  };
  for (const Case &c : {Case{{1, 300, 2, 2, 64, true}, bf16},
                        Case{{1, 200, 1, 1, 128, false}, DType::F32},
                        Case{{1, 150, 4, 3, 32, true, 2, 1}, bf16},
                        Case{{1, 130, 1, 1, 40, true}, bf16},
                        Case{{2, 150, 2, 2, 64, false}, bf16}}) {
    SCOPED_TRACE("s " + std::to_string(c.a.s) + " d " + std::to_string(c.a.d) +
                 (c.a.causal ? " causal" : ""));
    for (int run = 0; run < 2; ++run)
      expectBf16Attention(on(), c.a, c.gradients);
  }
}

TEST_P(Kernels, Bf16ContextParallelAttentionOnTensorCores) {
  // Context parallelism's bf16 attention runs on tensor cores too: a rank's
  // queries are its two chunks of the sequence, its keys every rank's,
  // gathered, or one rank's (the ring's step s brings rank (i − s) mod c's),
  // and the causal mask compares places in the sequence. Chunks of 75 and
  // 45 rows cross the forward's query blocks (128) and key tiles (64) and
  // the backward's key blocks (128) and query tiles mid-tile; c = 3's
  // gathered keys are three runs of 90 that no tile crosses. Each launch
  // against float64 at the rows' places: its output and log-sum-exp (−∞
  // where a step's keys all lie after a row), and its gradients from the
  // whole sequence's output and log-sum-exp, as the ring's backward takes
  // them.
  if (on() == "cpu")
    GTEST_SKIP() << "the tiles are the generated kernels'";
  const DType bf16 = DType::BF16;
  struct Case {
    int64_t c;
    AttnDims a; // a.s: the whole sequence
  };
  for (const Case &cs : {Case{2, {1, 300, 2, 1, 32, true}},
                         Case{3, {1, 270, 4, 2, 64, true, 2, 0}},
                         Case{2, {1, 300, 2, 2, 40, false}}}) {
    const AttnDims &a = cs.a;
    const int64_t c = cs.c, rows = a.s / c;
    const int64_t qInner = a.h * a.d, kvInner = a.kv * a.d;
    Vec q = roundedToBf16(randomVec(a.b * a.s * qInner)),
        k = roundedToBf16(randomVec(a.b * a.s * kvInner)),
        v = roundedToBf16(randomVec(a.b * a.s * kvInner)),
        dout = roundedToBf16(randomVec(q.size())), wholeLse;
    Vec o = roundedToBf16(refAttention(a, q, k, v, &wholeLse));
    for (int64_t rank = 0; rank < c; ++rank) {
      RowPlaces at;
      for (int64_t l = 0; l < rows; ++l)
        at.queries.push_back(
            strata::runtime::contextPosition(l, rows, c, rank));
      const Vec qPart = contextRows(q, a.b, a.s, qInner, c, rank),
                oPart = contextRows(o, a.b, a.s, qInner, c, rank),
                lsePart = contextLse(wholeLse, a, c, rank),
                doutPart = contextRows(dout, a.b, a.s, qInner, c, rank);
      // Step −1: every rank's keys, gathered; then the ring's steps.
      for (int64_t step = -1; step < c; ++step) {
        SCOPED_TRACE(
            "c " + std::to_string(c) + " rank " + std::to_string(rank) +
            (step < 0 ? " gathered" : " step " + std::to_string(step)) +
            (a.causal ? " causal" : ""));
        const int64_t from = strata::runtime::ringKeyRank(rank, step, c);
        at.keys.clear();
        for (int64_t l = 0; l < (step < 0 ? a.s : rows); ++l)
          at.keys.push_back(
              step < 0 ? strata::runtime::gatheredContextPosition(l, rows, c)
                       : strata::runtime::contextPosition(l, rows, c, from));
        const Vec kPart = step < 0 ? contextGathered(k, a.b, a.s, kvInner, c)
                                   : contextRows(k, a.b, a.s, kvInner, c, from),
                  vPart = step < 0 ? contextGathered(v, a.b, a.s, kvInner, c)
                                   : contextRows(v, a.b, a.s, kvInner, c, from);
        const int64_t keys = at.keys.size();
        const std::vector<int64_t> qShape = {a.b, rows, a.h, a.d},
                                   kvShape = {a.b, keys, a.kv, a.d},
                                   lseShape = {a.b, a.h, rows};
        std::map<std::string, Arg> args = attentionArgs(a);
        args["context_parallel"] = intArg(c);
        args["context_rank"] = intArg(rank);
        args["ring_step"] = intArg(step < 0 ? 0 : step);

        Harness f(on());
        uint32_t out = f.add(qShape, bf16), lse = f.add(lseShape);
        f.run("attention_fwd",
              {f.input(qShape, qPart, bf16), f.input(kvShape, kPart, bf16),
               f.input(kvShape, vPart, bf16)},
              {out, lse}, args);
        Vec expectedLse;
        Vec expected = refAttentionAt(a, at, qPart, kPart, vPart, expectedLse);
        expectClose(f.read(out), expected, kTolBf16, "attention_fwd");
        expectLse(f.read(lse), expectedLse, "attention_fwd log-sum-exp");

        Harness g(on());
        uint32_t dq = g.add(qShape, bf16), dk = g.add(kvShape, bf16),
                 dv = g.add(kvShape, bf16);
        g.run("attention_bwd",
              {g.input(qShape, qPart, bf16), g.input(kvShape, kPart, bf16),
               g.input(kvShape, vPart, bf16), g.input(qShape, oPart, bf16),
               g.input(lseShape, lsePart), g.input(qShape, doutPart, bf16)},
              {dq, dk, dv}, args);
        auto [refQ, refK, refV] = refAttentionBwdOnTensorCores(
            a, at, qPart, kPart, vPart, oPart, lsePart, doutPart);
        expectClose(g.read(dq), refQ, kTolOnTensorCores, "query gradient");
        expectClose(g.read(dk), refK, kTolOnTensorCores, "key gradient");
        expectClose(g.read(dv), refV, kTolOnTensorCores, "value gradient");
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// cuDNN's fused attention (runtime/cuda/AttentionRunner.h), on a GPU that
// has it: the launches strata's plans make, through cuDNN's graphs.
//===----------------------------------------------------------------------===//

class CudnnAttention : public testing::Test {
protected:
  void SetUp() override {
    std::string why;
    for (const char *arch : {"sm_90a", "sm_80"}) {
      cuda::Gpu *gpu = nullptr;
      std::string error = openGpuFor(arch, gpu);
      if (error.empty()) {
        kernels = arch;
        break;
      }
      why += (why.empty() ? "" : "; ") + std::string(arch) + ": " + error;
    }
    if (kernels.empty())
      GTEST_SKIP() << "skipped: no GPU (" << why << ")";
    std::string error;
    if (!cuda::loadCudnn(error))
      GTEST_SKIP() << "skipped: no cuDNN (" << error << ")";
  }
  /// The GPU's own kernels, and the same with attention through cuDNN.
  Device strata() const { return kernels; }
  Device cudnn() const { return kernels + std::string(kCudnnSuffix); }

  std::string kernels;
};

TEST_F(CudnnAttention, MatchesFloat64AtThePlansShapes) {
  // gpt-tiny's and llama-tiny's attention (head dimension 16, grouped
  // queries, a tensor-parallel rank's share of the heads), and head
  // dimensions 64 and 128 causal and not: every launch through cuDNN
  // (never strata's kernel: a test fails if cuDNN refuses), held to what
  // strata's tensor-core kernels are held to.
  for (const AttnDims &a :
       {AttnDims{2, 64, 4, 4, 16, true}, AttnDims{2, 64, 4, 2, 16, true},
        AttnDims{1, 64, 2, 1, 16, true, 2, 0}, AttnDims{1, 128, 4, 2, 64, true},
        AttnDims{1, 192, 2, 2, 64, false}, AttnDims{2, 128, 2, 2, 128, true},
        AttnDims{1, 128, 2, 1, 128, false}}) {
    SCOPED_TRACE("b " + std::to_string(a.b) + " s " + std::to_string(a.s) +
                 " h " + std::to_string(a.h) + "/" + std::to_string(a.kv) +
                 " d " + std::to_string(a.d) + (a.causal ? " causal" : ""));
    expectBf16Attention(cudnn(), a, DType::BF16);
  }
}

/// refAttentionBwdOnTensorCores's gradients at one place (batch 0): dQ of
/// query row `i` of head `h`, and dK and dV of key `j` of that head's kv
/// head, summed over the query heads that read it.
std::array<Vec, 3> refAttentionBwdAt(const AttnDims &a, const Vec &q,
                                     const Vec &k, const Vec &v, const Vec &o,
                                     const Vec &lse, const Vec &dout, int64_t h,
                                     int64_t i, int64_t j) {
  const double scale = 1 / std::sqrt(double(a.d));
  auto qAt = [&](int64_t row, int64_t head) {
    return (row * a.h + head) * a.d;
  };
  auto kvAt = [&](int64_t row, int64_t head) {
    return (row * a.kv + head) * a.d;
  };
  // P and dS of query (row, head) against key `key` of kv head `g`, as the
  // tensor cores take them: rounded to bf16.
  auto products = [&](int64_t row, int64_t head, int64_t key, int64_t g,
                      double &p, double &ds) {
    double score = 0, dp = 0, dRow = 0;
    for (int64_t x = 0; x < a.d; ++x) {
      score += q[qAt(row, head) + x] * k[kvAt(key, g) + x];
      dp += dout[qAt(row, head) + x] * v[kvAt(key, g) + x];
      dRow += dout[qAt(row, head) + x] * o[qAt(row, head) + x];
    }
    double exact =
        std::exp(score * scale - double(float(lse[head * a.s + row])));
    p = roundToBf16(float(exact));
    ds = roundToBf16(float(exact * (dp - dRow)));
  };
  int64_t g = (a.offset + h) / a.groupSize();
  Vec dq(a.d, 0.0), dk(a.d, 0.0), dv(a.d, 0.0);
  for (int64_t key = 0; key < (a.causal ? i + 1 : a.s); ++key) {
    double p, ds;
    products(i, h, key, g, p, ds);
    for (int64_t x = 0; x < a.d; ++x)
      dq[x] += scale * ds * k[kvAt(key, g) + x];
  }
  for (int64_t head = 0; head < a.h; ++head) {
    if ((a.offset + head) / a.groupSize() != g)
      continue;
    for (int64_t row = a.causal ? j : 0; row < a.s; ++row) {
      double p, ds;
      products(row, head, j, g, p, ds);
      for (int64_t x = 0; x < a.d; ++x) {
        dv[x] += p * dout[qAt(row, head) + x];
        dk[x] += scale * ds * q[qAt(row, head) + x];
      }
    }
  }
  return {dq, dk, dv};
}

/// `rows` rows of `width` of `all` (row-major), as a sample for expectClose.
Vec rowsOf(const Vec &all, const std::vector<int64_t> &rows, int64_t width) {
  Vec out;
  for (int64_t r : rows)
    out.insert(out.end(), all.begin() + r * width,
               all.begin() + (r + 1) * width);
  return out;
}

TEST(AttentionReferences, SampledGradientsAreTheWholeReferences) {
  // The benchmark shapes' float64 check reads the backward's reference at
  // sampled places (refAttentionBwdAt; the forward's rows are
  // refAttention's own, refAttentionRow): here, at every place of small
  // shapes, they are the whole reference's.
  for (const AttnDims &a :
       {AttnDims{1, 9, 4, 2, 8, true}, AttnDims{1, 7, 3, 3, 8, false},
        AttnDims{1, 6, 2, 1, 8, true, 2, 0}}) {
    Vec q = roundedToBf16(randomVec(a.s * a.h * a.d)),
        k = roundedToBf16(randomVec(a.s * a.kv * a.d)),
        v = roundedToBf16(randomVec(a.s * a.kv * a.d)),
        dout = roundedToBf16(randomVec(q.size())), lse;
    Vec o = refAttention(a, q, k, v, &lse);
    auto [dq, dk, dv] = refAttentionBwdOnTensorCores(a, q, k, v, o, lse, dout);
    for (int64_t h = 0; h < a.h; ++h)
      for (int64_t i = 0; i < a.s; ++i) {
        int64_t g = (a.offset + h) / a.groupSize();
        auto [dqAt, dkAt, dvAt] =
            refAttentionBwdAt(a, q, k, v, o, lse, dout, h, i, i);
        for (int64_t x = 0; x < a.d; ++x) {
          EXPECT_NEAR(dqAt[x], dq[(i * a.h + h) * a.d + x], 1e-12);
          EXPECT_NEAR(dkAt[x], dk[(i * a.kv + g) * a.d + x], 1e-12);
          EXPECT_NEAR(dvAt[x], dv[(i * a.kv + g) * a.d + x], 1e-12);
        }
      }
  }
}

TEST_F(CudnnAttention, MatchesStrataAndFloat64AtTheBenchmarksShapes) {
  // The check's attention shapes (hidden 2048, causal, sequence 2048 and
  // 4096, head dimension 64 and 128), one sample a batch: cuDNN's forward
  // and backward against strata's kernels on the same inputs, element for
  // element, and both against float64 at sampled rows (whole, the
  // reference would take minutes).
  for (int64_t d : {64, 128})
    for (int64_t s : {2048, 4096}) {
      AttnDims a{1, s, 2048 / d, 2048 / d, d, true};
      SCOPED_TRACE("d " + std::to_string(d) + " s " + std::to_string(s));
      Vec q = roundedToBf16(randomVec(a.b * a.s * a.h * a.d)),
          k = roundedToBf16(randomVec(q.size())),
          v = roundedToBf16(randomVec(q.size())),
          dout = roundedToBf16(randomVec(q.size()));
      AttentionRun forward[2], backward[2];
      for (int through = 0; through < 2; ++through) {
        forward[through] =
            runAttentionFwd(through ? cudnn() : strata(), a, q, k, v);
        EXPECT_EQ(forward[through].library, through ? "cudnn" : "");
      }
      // Both backwards from cuDNN's forward: the same inputs.
      const Vec &o = forward[1].outputs[0], &lse = forward[1].outputs[1];
      for (int through = 0; through < 2; ++through) {
        backward[through] = runAttentionBwd(through ? cudnn() : strata(), a, q,
                                            k, v, o, lse, dout, DType::BF16);
        EXPECT_EQ(backward[through].library, through ? "cudnn" : "");
      }
      // Each within the other's bf16 rounding and its own (each is held to
      // 1e-2 of float64 in the forward, 4e-3 of the tensor-core model in
      // the backward).
      expectClose(forward[1].outputs[0], forward[0].outputs[0], 2 * kTolBf16,
                  "output, cuDNN's");
      expectClose(forward[1].outputs[1], forward[0].outputs[1], 2 * kTol,
                  "log-sum-exp, cuDNN's");
      const char *names[3] = {"query gradient", "key gradient",
                              "value gradient"};
      for (int n = 0; n < 3; ++n)
        expectClose(backward[1].outputs[n], backward[0].outputs[n], 8e-3,
                    names[n]);

      // float64 at sampled places: the first, last and random rows of
      // random heads.
      std::vector<std::pair<int64_t, int64_t>> places = {{0, 0},
                                                         {a.h - 1, a.s - 1}};
      while (places.size() < 8)
        places.push_back({int64_t(rng()() % a.h), int64_t(rng()() % a.s)});
      std::vector<int64_t> rows, kvRows; // rows of [s·heads, d]
      std::vector<int64_t> lseAt;
      Vec refOut, refLse, refDq, refDk, refDv;
      for (auto [h, i] : places) {
        double rowLse;
        Vec row = refAttentionRow(a, q, k, v, 0, h, i, rowLse);
        refOut.insert(refOut.end(), row.begin(), row.end());
        refLse.push_back(rowLse);
        rows.push_back(i * a.h + h);
        kvRows.push_back(i * a.kv + (a.offset + h) / a.groupSize());
        lseAt.push_back(h * a.s + i);
        auto [dq, dk, dv] =
            refAttentionBwdAt(a, q, k, v, o, lse, dout, h, i, i);
        refDq.insert(refDq.end(), dq.begin(), dq.end());
        refDk.insert(refDk.end(), dk.begin(), dk.end());
        refDv.insert(refDv.end(), dv.begin(), dv.end());
      }
      for (int through = 0; through < 2; ++through) {
        SCOPED_TRACE(through ? "cuDNN" : "strata");
        Vec lseRows;
        for (int64_t at : lseAt)
          lseRows.push_back(forward[through].outputs[1][at]);
        expectClose(rowsOf(forward[through].outputs[0], rows, a.d), refOut,
                    kTolBf16, "output rows");
        expectClose(lseRows, refLse, kTol, "log-sum-exp rows");
        expectClose(rowsOf(backward[through].outputs[0], rows, a.d), refDq,
                    4e-3, "query gradient rows");
        expectClose(rowsOf(backward[through].outputs[1], kvRows, a.d), refDk,
                    4e-3, "key gradient rows");
        expectClose(rowsOf(backward[through].outputs[2], kvRows, a.d), refDv,
                    4e-3, "value gradient rows");
      }
    }
}

} // namespace
