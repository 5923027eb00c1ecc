//===- PlanMemory.cpp - arena offsets by liveness -------------------------===//
//
// A workspace buffer is free for reuse only when every stream that touches
// it is past its last use. The compute stream runs a program's
// instructions in order, so liveness by instruction index holds for it; a
// buffer the communication stream touches (a pipeline transfer's, posted
// at an exchange point outside its program's body) gets memory of its own
// for the whole iteration instead.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "dialects/exec/ExecDialect.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <map>

namespace strata {
#define GEN_PASS_DEF_PLANMEMORY
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

constexpr int64_t kAlignment = 64; // a cache line; CUDA wants 256 later

int64_t alignUp(int64_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

/// A root buffer's life in one program: the instructions from its first
/// use to its last, inclusive (an instruction never writes over its own
/// inputs).
struct Life {
  exec::BufferOp buffer;
  int64_t first = 0, last = 0;
  int64_t bytes = 0;
  int64_t offset = -1;
};

/// The buffers an instruction names, and whether it runs on the
/// communication stream.
bool operandsOf(Operation &op, SmallVectorImpl<FlatSymbolRefAttr> &out) {
  exec::instructionBuffers(&op, out, out);
  if (auto collective = dyn_cast<exec::CollectiveOp>(op))
    return collective.getStreamOrCompute() == exec::Stream::Comm;
  return isa<exec::SendOp, exec::RecvOp>(op);
}

struct PlanMemoryPass : strata::impl::PlanMemoryBase<PlanMemoryPass> {
  void runOnOperation() override {
    for (auto rank : getOperation().getOps<exec::RankOp>())
      if (failed(planRank(rank)))
        return signalPassFailure();
  }

  LogicalResult planRank(exec::RankOp rank) {
    llvm::StringMap<exec::BufferOp> byName;
    for (auto buffer : rank.getBody().front().getOps<exec::BufferOp>())
      byName[buffer.getSymName()] = buffer;
    auto rootOf = [&](StringRef name) {
      exec::BufferOp buffer = byName.lookup(name);
      if (auto alias = buffer.getAlias())
        return byName.lookup(*alias);
      return buffer;
    };

    // Persistent: end to end, in declaration order. The arena ends where
    // its last buffer does.
    int64_t persistent = 0, next = 0;
    for (auto buffer : rank.getBody().front().getOps<exec::BufferOp>()) {
      if (buffer.getArena() != exec::Arena::Persistent || buffer.getAlias())
        continue;
      buffer.setOffset(next);
      persistent = next + buffer.getBytes();
      next = alignUp(persistent);
    }

    // Workspace: buffers the communication stream touches first, each its
    // own; then each program alone (programs run one after another on the
    // compute stream), from where those end.
    llvm::DenseMap<Operation *, exec::ProgramOp> owner;
    llvm::DenseSet<Operation *> exclusive;
    int64_t exclusiveBytes = 0;
    for (auto program : rank.getBody().front().getOps<exec::ProgramOp>())
      for (Operation &op : program.getBody().front()) {
        SmallVector<FlatSymbolRefAttr> refs;
        if (!operandsOf(op, refs))
          continue;
        for (FlatSymbolRefAttr ref : refs) {
          exec::BufferOp root = rootOf(ref.getValue());
          if (root.getArena() != exec::Arena::Workspace ||
              !exclusive.insert(root).second)
            continue;
          root.setOffset(exclusiveBytes);
          exclusiveBytes = alignUp(exclusiveBytes + root.getBytes());
        }
      }
    int64_t workspace = exclusiveBytes;
    for (auto program : rank.getBody().front().getOps<exec::ProgramOp>()) {
      llvm::DenseMap<Operation *, size_t> index;
      std::vector<Life> lives;
      int64_t step = 0;
      for (Operation &op : program.getBody().front()) {
        SmallVector<FlatSymbolRefAttr> refs;
        operandsOf(op, refs);
        for (FlatSymbolRefAttr ref : refs) {
          exec::BufferOp root = rootOf(ref.getValue());
          if (root.getArena() != exec::Arena::Workspace)
            continue;
          auto [seen, inserted] = owner.try_emplace(root, program);
          if (seen->second != program)
            return root.emitOpError()
                   << "is a workspace buffer used by two programs ("
                   << seen->second.getSymName() << " and "
                   << program.getSymName()
                   << "): what outlives a program must be persistent";
          if (exclusive.contains(root))
            continue;
          auto [it, fresh] = index.try_emplace(root, lives.size());
          if (fresh)
            lives.push_back({root, step, step, root.getBytes(), -1});
          lives[it->second].last = step;
        }
        ++step;
      }
      workspace =
          std::max(workspace, exclusiveBytes + place(lives, exclusiveBytes));
    }
    // Stash: per chunk of the stage, its buffers end to end make one slot;
    // the chunk's slots follow each other, and the chunks each other.
    std::map<int64_t, std::vector<exec::BufferOp>> groups;
    for (auto buffer : rank.getBody().front().getOps<exec::BufferOp>())
      if (buffer.getArena() == exec::Arena::Stash && !buffer.getAlias())
        groups[int64_t(buffer.getStashGroup().value_or(0))].push_back(buffer);
    ArrayRef<int64_t> slots;
    if (auto attr = rank.getStashSlotsAttr())
      slots = attr.asArrayRef();
    int64_t stash = 0;
    OpBuilder b(rank);
    for (auto &[group, members] : groups) {
      if (group < 0 || group >= int64_t(slots.size()))
        return members.front().emitOpError()
               << "is in stash group " << group
               << ", which the rank's stash_slots do not size";
      int64_t stride = 0;
      for (exec::BufferOp buffer : members) {
        buffer.setOffset(stash + stride);
        stride = alignUp(stride + buffer.getBytes());
      }
      for (exec::BufferOp buffer : members)
        buffer.setSlotStrideAttr(b.getI64IntegerAttr(stride));
      stash += stride * slots[group];
    }
    for (auto buffer : rank.getBody().front().getOps<exec::BufferOp>()) {
      if (auto alias = buffer.getAlias()) {
        exec::BufferOp root = byName.lookup(*alias);
        buffer.setOffset(root.getPlacedOffset() +
                         int64_t(buffer.getViewOffset().value_or(0)));
        if (auto stride = root.getSlotStrideAttr())
          buffer.setSlotStrideAttr(stride);
      } else if (buffer.getArena() == exec::Arena::Workspace &&
                 buffer.getPlacedOffset() < 0) {
        return buffer.emitOpError() << "is never used";
      }
    }
    rank.setPersistentBytesAttr(b.getI64IntegerAttr(persistent));
    rank.setWorkspaceBytesAttr(b.getI64IntegerAttr(workspace));
    if (!groups.empty())
      rank.setStashBytesAttr(b.getI64IntegerAttr(stash));
    return success();
  }

  /// Greedy by size: largest first, each at the lowest offset that no
  /// already placed buffer with an overlapping life occupies. Returns the
  /// arena size the program needs.
  static int64_t place(std::vector<Life> &lives, int64_t base) {
    std::vector<Life *> order;
    for (Life &life : lives)
      order.push_back(&life);
    std::stable_sort(order.begin(), order.end(), [](Life *a, Life *b) {
      return a->bytes != b->bytes ? a->bytes > b->bytes : a->first < b->first;
    });
    std::vector<Life *> placed;
    int64_t size = 0;
    for (Life *life : order) {
      // Occupied ranges of buffers alive at the same time, by offset.
      std::vector<std::pair<int64_t, int64_t>> busy;
      for (Life *other : placed)
        if (other->first <= life->last && life->first <= other->last)
          busy.push_back({other->offset, other->offset + other->bytes});
      std::sort(busy.begin(), busy.end());
      int64_t offset = 0;
      for (auto [start, end] : busy) {
        if (offset + life->bytes <= start)
          break;
        offset = std::max(offset, alignUp(end));
      }
      life->offset = offset;
      life->buffer.setOffset(base + offset);
      placed.push_back(life);
      size = std::max(size, offset + life->bytes);
    }
    return size;
  }
};

} // namespace
