//===- Checkpoint.cpp - parameters gathered from every rank ---------------===//
#include "runtime/exec/Checkpoint.h"

namespace strata::runtime {

std::vector<ParamPiece> piecesOf(const RankMemory &memory) {
  std::vector<ParamPiece> pieces;
  for (const Param &param : memory.plan().params) {
    ParamPiece piece;
    piece.values = memory.parameterValues(param);
    const Buffer &value = memory.plan().buffers[param.value];
    if (value.dtype == DType::F32)
      piece.exact.push_back({0, value.elements});
    for (const MasterSegment &m : param.masters)
      piece.exact.push_back(
          {m.begin, m.begin + memory.plan().buffers[m.buffer].elements});
    pieces.push_back(std::move(piece));
  }
  return pieces;
}

std::map<std::string, HostTensor>
assemble(const Plan &plan, const std::vector<std::vector<ParamPiece>> &all) {
  std::map<std::string, HostTensor> tensors;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t r = 0; r < plan.ranks.size(); ++r) {
      const RankPlan &rank = plan.ranks[r];
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
        const std::vector<int64_t> &local = rank.buffers[param.value].shape;
        size_t dims = local.size();
        std::vector<int64_t> index(dims, 0), stride(dims, 1);
        for (size_t d = dims; d-- > 1;)
          stride[d - 1] = stride[d] * param.globalShape[d];
        for (int64_t e = 0; e < int64_t(piece.values.size()); ++e) {
          bool write = pass == 0;
          for (auto [begin, end] : piece.exact)
            write |= pass == 1 && e >= begin && e < end;
          int64_t global = 0;
          bool padding = false;
          for (size_t d = 0; d < dims; ++d) {
            int64_t at = index[d] + param.shardOffset[d];
            padding |= at >= param.globalShape[d];
            global += at * stride[d];
          }
          if (write && !padding)
            tensor.values[global] = piece.values[e];
          for (size_t d = dims; d-- > 0;) {
            if (++index[d] < local[d])
              break;
            index[d] = 0;
          }
        }
      }
    }
  }
  return tensors;
}

} // namespace strata::runtime
