//===- ParameterGather.cpp - parameters gathered from every rank ----------===//
#include "runtime/train/ParameterGather.h"
#include "runtime/exec/Parameters.h"

namespace strata::runtime {

std::vector<ParamPiece> piecesOf(Executor &executor) {
  const RankPlan &rank = executor.rankPlan();
  std::vector<ParamPiece> pieces;
  for (const Param &param : rank.params) {
    ParamPiece piece;
    piece.values = parameterValues(executor, param);
    const Buffer &value = rank.buffers[param.value];
    if (value.dtype == DType::F32)
      piece.exact.push_back({0, value.elements});
    if (rank.master != kNoBuffer)
      for (const StateSegment &m : param.state)
        piece.exact.push_back({m.begin, m.begin + m.length});
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

std::map<std::string, HostTensor>
assemble(const Plan &plan, const std::vector<std::vector<ParamPiece>> &all) {
  std::map<std::string, HostTensor> tensors;
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto &[r, rank] : plan.ranks) {
      for (size_t p = 0; p < rank.params.size(); ++p) {
        const Param &param = rank.params[p];
        HostTensor &tensor = tensors[param.name];
        int64_t total = 1;
        for (int64_t dim : param.globalShape)
          total *= dim;
        if (tensor.values.empty()) {
          tensor.shape = param.globalShape;
          tensor.values.assign(total, 0.0f);
        }
        const ParamPiece &piece = all[r][p];
        forEachShardElement(param, rank.buffers[param.value].shape,
                            [&](int64_t e, int64_t global, bool padding) {
                              bool write = pass == 0;
                              for (auto [begin, end] : piece.exact)
                                write |= pass == 1 && e >= begin && e < end;
                              if (write && !padding)
                                tensor.values[global] = piece.values[e];
                            });
      }
    }
  }
  return tensors;
}

} // namespace strata::runtime
