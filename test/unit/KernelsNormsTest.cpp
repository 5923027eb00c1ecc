//===- KernelsNormsTest.cpp
//-------------------------------------------------===//
//
// LayerNorm and RMSNorm, with residual adds fused in; each against its float64
// reference on every device (KernelTesting.h).
//
//===----------------------------------------------------------------------===//
#include "KernelTesting.h"

using namespace strata::kernel_testing;

namespace {

TEST_P(Kernels, NormsAndTheirGradients) {
  const int64_t rows = 9, cols = 16;
  const double eps = 1e-5;
  for (bool layerNorm : {true, false}) {
    Vec x = randomVec(rows * cols, 3.0), w = randomVec(cols),
        b = randomVec(cols), dy = randomVec(rows * cols);
    Harness h(on());
    uint32_t ix = h.input({rows, cols}, x), iw = h.input({cols}, w);
    std::vector<uint32_t> ins = {ix, iw};
    if (layerNorm)
      ins.push_back(h.input({cols}, b));
    uint32_t out = h.add({rows, cols});
    h.run(layerNorm ? "layer_norm_fwd" : "rms_norm_fwd", ins, {out},
          {{"epsilon", floatArg(eps)}});
    expectClose(h.read(out), refNorm(x, w, layerNorm ? &b : nullptr, cols, eps),
                kTol, layerNorm ? "layer_norm_fwd" : "rms_norm_fwd");

    Harness g(on());
    uint32_t gx = g.input({rows, cols}, x), gw = g.input({cols}, w),
             gdy = g.input({rows, cols}, dy);
    uint32_t dx = g.add({rows, cols}), dw = g.add({cols});
    std::vector<uint32_t> outs = {dx, dw};
    if (layerNorm)
      outs.push_back(g.add({cols}));
    g.run(layerNorm ? "layer_norm_bwd" : "rms_norm_bwd", {gx, gw, gdy}, outs,
          {{"epsilon", floatArg(eps)}});
    const Vec *bias = layerNorm ? &b : nullptr;
    expectClose(
        g.read(dx),
        vjp([&](const Vec &v) { return refNorm(v, w, bias, cols, eps); }, x,
            dy),
        kTol, "input gradient");
    expectClose(
        g.read(dw),
        vjp([&](const Vec &v) { return refNorm(x, v, bias, cols, eps); }, w,
            dy),
        kTol, "weight gradient");
    if (layerNorm)
      expectClose(
          g.read(outs[2]),
          vjp([&](const Vec &v) { return refNorm(x, w, &v, cols, eps); }, b,
              dy),
          kTol, "bias gradient");
  }
}

/// A norm's backward by its formula, in float64 (LayerNorm when `center`,
/// else RMSNorm): dx, dweight and dbias.
std::array<Vec, 3> refNormBwd(const Vec &x, const Vec &w, const Vec &dy,
                              bool center, int64_t cols, double eps) {
  Vec dx(x.size()), dw(cols, 0.0), db(cols, 0.0);
  for (size_t r = 0; r < x.size() / cols; ++r) {
    const double *xr = &x[r * cols], *dyr = &dy[r * cols];
    double mean = 0, var = 0;
    if (center) {
      for (int64_t c = 0; c < cols; ++c)
        mean += xr[c];
      mean /= cols;
    }
    for (int64_t c = 0; c < cols; ++c)
      var += (xr[c] - mean) * (xr[c] - mean);
    double rstd = 1 / std::sqrt(var / cols + eps);
    double meanG = 0, meanGX = 0;
    for (int64_t c = 0; c < cols; ++c) {
      double g = dyr[c] * w[c], xhat = (xr[c] - mean) * rstd;
      meanG += g;
      meanGX += g * xhat;
      dw[c] += dyr[c] * xhat;
      db[c] += dyr[c];
    }
    meanG = center ? meanG / cols : 0;
    meanGX /= cols;
    for (int64_t c = 0; c < cols; ++c) {
      double xhat = (xr[c] - mean) * rstd;
      dx[r * cols + c] = rstd * (dyr[c] * w[c] - meanG - xhat * meanGX);
    }
  }
  return {dx, dw, db};
}

TEST_P(Kernels, NormsAtTrainingWidthsOverManyBlocks) {
  // Rows of 768 (gpt2-124m's), of 2056 (past the 2048 a warp holds in
  // registers: read again between passes) and of 70 (not a multiple of 8:
  // one element at a time); 600 rows, so the backward's weight and bias
  // gradients are added over 300 blocks in two stages (19 groups of 16).
  // The gradients against their formula in float64.
  const int64_t rows = 600;
  const double eps = 1e-5;
  for (int64_t cols : {768, 2056, 70})
    for (bool layerNorm : {true, false}) {
      SCOPED_TRACE(std::to_string(cols) +
                   (layerNorm ? " columns, layer norm" : " columns, rms norm"));
      Vec x = randomVec(rows * cols, 2.0), w = randomVec(cols),
          b = randomVec(cols), dy = randomVec(rows * cols);
      Harness h(on());
      std::vector<uint32_t> ins = {h.input({rows, cols}, x),
                                   h.input({cols}, w)};
      if (layerNorm)
        ins.push_back(h.input({cols}, b));
      uint32_t out = h.add({rows, cols});
      h.run(layerNorm ? "layer_norm_fwd" : "rms_norm_fwd", ins, {out},
            {{"epsilon", floatArg(eps)}});
      expectClose(h.read(out),
                  refNorm(x, w, layerNorm ? &b : nullptr, cols, eps), kTol,
                  "forward");

      Harness g(on());
      uint32_t gx = g.input({rows, cols}, x), gw = g.input({cols}, w),
               gdy = g.input({rows, cols}, dy);
      std::vector<uint32_t> outs = {g.add({rows, cols}), g.add({cols})};
      if (layerNorm)
        outs.push_back(g.add({cols}));
      g.run(layerNorm ? "layer_norm_bwd" : "rms_norm_bwd", {gx, gw, gdy}, outs,
            {{"epsilon", floatArg(eps)}});
      auto [dx, dw, db] = refNormBwd(x, w, dy, layerNorm, cols, eps);
      expectClose(g.read(outs[0]), dx, kTol, "input gradient");
      expectClose(g.read(outs[1]), dw, kTol, "weight gradient");
      if (layerNorm)
        expectClose(g.read(outs[2]), db, kTol, "bias gradient");
    }
}

TEST_P(Kernels, ResidualAddsFusedIntoTheNormAfterThem) {
  // A residual add, a bias add and the norm of what they wrote, as the
  // fusion pass closes a group with a norm: on a GPU one kernel whose warp
  // for a row runs the adds on the row, then the norm. 70 columns: lanes
  // with three elements and lanes with two. Also in bf16, where the norm
  // reads the sum as its buffer rounded it; and with the norm's output on
  // the residual's bytes, as memory planning may place it (the lane that
  // read element c of x writes element c of y).
  const int64_t rows = 7, cols = 70, n = rows * cols;
  const double eps = 1e-5;
  for (DType dtype : {DType::F32, DType::BF16})
    for (bool layerNorm : {true, false})
      for (bool inPlace : {false, true}) {
        bool bf16 = dtype == DType::BF16;
        Vec x = randomVec(n), r = randomVec(n), bias = randomVec(cols),
            w = randomVec(cols), b = randomVec(cols);
        if (bf16) {
          x = roundedToBf16(x);
          r = roundedToBf16(r);
        }
        Harness h(on());
        uint32_t ix = h.input({rows, cols}, x, dtype),
                 ir = h.input({rows, cols}, r, dtype),
                 ibias = h.input({cols}, bias), iw = h.input({cols}, w);
        uint32_t a = h.add({rows, cols}, dtype),
                 sum = h.add({rows, cols}, dtype),
                 y = inPlace ? h.alias(ix) : h.add({rows, cols}, dtype);
        std::vector<uint32_t> normIns = {sum, iw};
        if (layerNorm)
          normIns.push_back(h.input({cols}, b));
        h.runFused({{"add", {ix, ir}, {a}, {}},
                    {"add", {a, ibias}, {sum}, {}},
                    {layerNorm ? "layer_norm_fwd" : "rms_norm_fwd",
                     normIns,
                     {y},
                     {{"epsilon", floatArg(eps)}}}});
        Vec ea(n), esum(n);
        for (int64_t i = 0; i < n; ++i) {
          ea[i] = bf16 ? roundToBf16(float(x[i] + r[i])) : x[i] + r[i];
          esum[i] = ea[i] + bias[i % cols];
          if (bf16)
            esum[i] = roundToBf16(float(esum[i]));
        }
        Vec ey = refNorm(esum, w, layerNorm ? &b : nullptr, cols, eps);
        double tol = bf16 ? kTolBf16 : kTol;
        std::string what = std::string(layerNorm ? "layer" : "rms") +
                           (bf16 ? " norm, bf16" : " norm") +
                           (inPlace ? ", on x: " : ": ");
        expectClose(h.read(a), ea, tol, (what + "residual add").c_str());
        expectClose(h.read(sum), esum, tol, (what + "bias add").c_str());
        expectClose(h.read(y), bf16 ? roundedToBf16(ey) : ey, tol,
                    (what + "norm").c_str());
      }
}

} // namespace
