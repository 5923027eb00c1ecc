//===- PlanMemory.cpp - arena offsets by liveness -------------------------===//
//
// A workspace buffer is free for reuse only when every stream that touches
// it is past its last use. The compute stream runs a program's
// instructions in order, so liveness by instruction index holds for it. A
// buffer another stream touches lives, in those terms, from the compute
// stream's record that the other stream waited for before it (all the
// compute stream issued before is done by then) to the compute stream's
// first wait on a record the other stream made after it (the compute
// stream goes on only once it is done): the ring of context parallelism's
// shifts on the context stream, fenced so. One without both fences (a
// pipeline transfer's, posted at an exchange point outside its program's
// body) gets memory of its own for the whole iteration instead.
//
// Placement is a linear scan in n·log n: buffers in order of first use,
// each taking the smallest free block that holds it (best fit, freed
// blocks merged with their neighbours) once the buffers that died before
// its first use have given theirs back. A plan's largest programs hold
// tens of thousands of buffers; no step looks at all of them.
//
//===----------------------------------------------------------------------===//
#include "compiler/BestFit.h"
#include "compiler/Passes.h"
#include "dialects/exec/ExecDialect.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <map>
#include <queue>

namespace strata {
#define GEN_PASS_DEF_PLANMEMORY
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

int64_t alignUp(int64_t bytes) { return exec::alignToArena(bytes); }

/// A root buffer's life in one program: the instructions from its first
/// use to its last, inclusive (an instruction never writes over its own
/// inputs).
struct Life {
  exec::BufferOp buffer;
  int64_t first = 0, last = 0;
  int64_t bytes = 0;
  int64_t offset = -1;
};

/// The buffers an instruction names, and whether it runs on a stream other
/// than the compute stream.
bool operandsOf(Operation &op, SmallVectorImpl<FlatSymbolRefAttr> &out) {
  exec::instructionBuffers(&op, out, out);
  return exec::instructionStream(&op) != exec::Stream::Compute;
}

/// Another stream's instruction's fences (the file comment), as indices of
/// the program's instructions; -1 where there is none.
struct Fence {
  int64_t entry = -1, exit = -1;
  bool complete() const { return entry >= 0 && exit >= 0; }
};

/// The fences of each of `program`'s instructions (those of the compute
/// stream's unused). A wait is for the latest record of its event issued
/// before it.
std::vector<Fence> fencesOf(exec::ProgramOp program) {
  llvm::StringMap<std::pair<int64_t, exec::Stream>> latest; // record, stream
  std::vector<Fence> fences;
  // Per stream: the latest compute record it waited for, and its
  // instructions not yet exited.
  std::map<exec::Stream, int64_t> entries;
  std::map<exec::Stream, std::vector<int64_t>> open;
  auto entry = [&](exec::Stream stream) -> int64_t & {
    return entries.try_emplace(stream, -1).first->second;
  };
  int64_t i = 0;
  for (Operation &op : program.getBody().front()) {
    fences.emplace_back();
    exec::Stream stream = exec::instructionStream(&op);
    if (auto record = dyn_cast<exec::RecordOp>(op)) {
      latest[record.getEvent()] = {i, stream};
    } else if (auto wait = dyn_cast<exec::WaitOp>(op)) {
      auto it = latest.find(wait.getEvent());
      if (it != latest.end()) {
        auto [at, from] = it->second;
        if (stream != exec::Stream::Compute && from == exec::Stream::Compute)
          entry(stream) = std::max(entry(stream), at);
        if (stream == exec::Stream::Compute && from != exec::Stream::Compute)
          llvm::erase_if(open[from], [&](int64_t issued) {
            if (issued > at)
              return false;
            fences[size_t(issued)].exit = i;
            return true;
          });
      }
    } else if (stream != exec::Stream::Compute) {
      fences.back().entry = entry(stream);
      open[stream].push_back(i);
    }
    ++i;
  }
  return fences;
}

struct PlanMemoryPass : strata::impl::PlanMemoryBase<PlanMemoryPass> {
  void runOnOperation() override {
    for (auto stage : getOperation().getOps<exec::TemplateOp>())
      if (failed(planTemplate(stage)))
        return signalPassFailure();
  }

  LogicalResult planTemplate(exec::TemplateOp stage) {
    llvm::StringMap<exec::BufferOp> byName;
    for (auto buffer : stage.getBody().front().getOps<exec::BufferOp>())
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
    for (auto buffer : stage.getBody().front().getOps<exec::BufferOp>()) {
      if (buffer.getArena() != exec::Arena::Persistent || buffer.getAlias())
        continue;
      buffer.setOffset(next);
      persistent = next + buffer.getBytes();
      next = alignUp(persistent);
    }

    // Workspace: buffers another stream touches unfenced first, each its
    // own; then each program alone (programs run one after
    // another on the compute stream), from where those end.
    llvm::DenseMap<Operation *, exec::ProgramOp> owner;
    llvm::DenseSet<Operation *> exclusive;
    llvm::DenseMap<exec::ProgramOp, std::vector<Fence>> fences;
    int64_t exclusiveBytes = 0;
    for (auto program : stage.getBody().front().getOps<exec::ProgramOp>()) {
      std::vector<Fence> &fenced = fences[program] = fencesOf(program);
      int64_t i = -1;
      for (Operation &op : program.getBody().front()) {
        ++i;
        SmallVector<FlatSymbolRefAttr> refs;
        if (!operandsOf(op, refs) || fenced[size_t(i)].complete())
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
    }
    int64_t workspace = exclusiveBytes;
    for (auto program : stage.getBody().front().getOps<exec::ProgramOp>()) {
      llvm::DenseMap<Operation *, size_t> index;
      std::vector<Life> lives;
      int64_t step = 0;
      const std::vector<Fence> &fenced = fences[program];
      for (Operation &op : program.getBody().front()) {
        SmallVector<FlatSymbolRefAttr> refs;
        operandsOf(op, refs);
        // Another stream's fenced instruction's buffers live over its
        // fences; any other instruction's, its own step.
        Fence span = fenced[size_t(step)];
        int64_t first = span.complete() ? span.entry : step,
                last = span.complete() ? span.exit : step;
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
            lives.push_back({root, first, last, root.getBytes(), -1});
          Life &life = lives[it->second];
          life.first = std::min(life.first, first);
          life.last = std::max(life.last, last);
        }
        ++step;
      }
      workspace =
          std::max(workspace, exclusiveBytes + place(lives, exclusiveBytes));
    }
    // Stash: per chunk of the stage and pool, its buffers end to end make
    // one slot; the slots follow each other, and the pools and chunks each
    // other — or, with slot classes, each class's members share one region
    // whose slot is its largest member's, the classes following each other.
    std::map<std::pair<int64_t, exec::StashPool>, SmallVector<exec::BufferOp>>
        groups = exec::stashMembers(stage);
    ArrayRef<int64_t> classes;
    if (DenseI64ArrayAttr attr = stage.getStashClassesAttr())
      classes = attr.asArrayRef();
    // Each (chunk, pool)'s class; without classes, its own.
    std::map<int64_t, SmallVector<std::pair<int64_t, exec::StashPool>>> byClass;
    for (auto &[key, members] : groups) {
      auto [group, pool] = key;
      size_t at = size_t(group) * 3 + size_t(pool);
      int64_t cls = classes.empty()       ? int64_t(byClass.size())
                    : at < classes.size() ? classes[at]
                                          : -1;
      if (cls < 0)
        return members.front().emitOpError()
               << "is in stash group " << group << ", pool "
               << exec::stringifyStashPool(pool)
               << ", which the template's stash_classes do not place";
      byClass[classes.empty() ? int64_t(byClass.size()) : cls].push_back(key);
    }
    ArrayRef<int64_t> strides;
    if (DenseI64ArrayAttr attr = stage.getStashStridesAttr())
      strides = attr.asArrayRef();
    int64_t stash = 0;
    OpBuilder b(stage);
    for (auto &[cls, keys] : byClass) {
      int64_t stride = 0, count = -1;
      for (auto [group, pool] : keys) {
        ArrayRef<int64_t> slots;
        if (DenseI64ArrayAttr attr = stage.getSlotsOf(pool))
          slots = attr.asArrayRef();
        exec::BufferOp first = groups[{group, pool}].front();
        if (group < 0 || group >= int64_t(slots.size()))
          return first.emitOpError()
                 << "is in stash group " << group << ", which the template's "
                 << exec::stringifyStashPool(pool) << " slots do not size";
        if (count >= 0 && slots[group] != count)
          return first.emitOpError()
                 << "is in stash class " << cls << " with " << slots[group]
                 << " slots, but the class's other pools have " << count;
        count = slots[group];
        stride = std::max(stride, exec::stashSlotBytes(groups[{group, pool}]));
      }
      // A class given its stride: the schedule placed its members' slots.
      if (!strides.empty()) {
        if (cls >= int64_t(strides.size()) || strides[size_t(cls)] < 1 ||
            strides[size_t(cls)] % exec::kArenaAlignment != 0)
          return stage.emitOpError()
                 << "gives stash class " << cls
                 << " no stride that is a positive multiple of "
                 << exec::kArenaAlignment << " bytes";
        stride = strides[size_t(cls)];
      }
      for (auto key : keys) {
        int64_t at = 0;
        for (exec::BufferOp buffer : groups[key]) {
          buffer.setOffset(stash + at);
          buffer.setSlotStrideAttr(b.getI64IntegerAttr(stride));
          at = exec::alignToArena(at + buffer.getBytes());
        }
      }
      stash += stride * count;
    }
    for (auto buffer : stage.getBody().front().getOps<exec::BufferOp>()) {
      if (auto alias = buffer.getAlias()) {
        exec::BufferOp root = byName.lookup(*alias);
        buffer.setOffset(root.getPlacedOffset() +
                         int64_t(buffer.getViewOffset().value_or(0)));
        if (auto stride = root.getSlotStrideAttr())
          buffer.setSlotStrideAttr(stride);
        if (auto pool = root.getStashPoolAttr())
          buffer.setStashPoolAttr(pool);
      } else if (buffer.getArena() == exec::Arena::Workspace &&
                 buffer.getPlacedOffset() < 0) {
        return buffer.emitOpError() << "is never used";
      }
    }
    stage.setPersistentBytesAttr(b.getI64IntegerAttr(persistent));
    stage.setWorkspaceBytesAttr(b.getI64IntegerAttr(workspace));
    if (!groups.empty())
      stage.setStashBytesAttr(b.getI64IntegerAttr(stash));
    return success();
  }

  /// Best-fit linear scan (see the file comment). Returns the arena size
  /// the program needs.
  static int64_t place(std::vector<Life> &lives, int64_t base) {
    std::vector<Life *> order;
    for (Life &life : lives)
      order.push_back(&life);
    // By first use; at the same step, larger first (less fragmentation).
    std::sort(order.begin(), order.end(), [](Life *a, Life *b) {
      if (a->first != b->first)
        return a->first < b->first;
      if (a->bytes != b->bytes)
        return a->bytes > b->bytes;
      return a->buffer.getSymName() < b->buffer.getSymName();
    });
    BestFit arena;
    // Live buffers by their last step, the earliest on top.
    std::priority_queue<std::pair<int64_t, Life *>,
                        std::vector<std::pair<int64_t, Life *>>, std::greater<>>
        live;
    int64_t size = 0;
    for (Life *life : order) {
      while (!live.empty() && live.top().first < life->first) {
        Life *dead = live.top().second;
        live.pop();
        arena.release(dead->offset, alignUp(dead->bytes));
      }
      life->offset = arena.take(alignUp(life->bytes));
      life->buffer.setOffset(base + life->offset);
      live.push({life->last, life});
      size = std::max(size, life->offset + life->bytes);
    }
    return size;
  }
};

} // namespace
