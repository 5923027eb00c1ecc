//===- StashInPlace.cpp - B's values for W over what B has read -----------===//
//
// With the backward cut in two, B takes a passed slot for what it computes
// for W (the output gradients W's matmuls read) while the forward's slot
// it reads is still held, and frees that one only at its end: for the
// length of B a stage keeps both. Under ZB-V that is when it keeps the most
// (2p chunk forwards and B's passed values: 7% over 1F1B's stash at p = 4),
// where the zero-bubble paper's count, which frees what B has read as it
// goes, has none. Here each passed buffer is written over a forward buffer
// of the kept pool that B has read for the last time before the
// instruction that first writes it (the compute stream runs B's
// instructions in order), as a view of it; the kept pool is then held
// until W, which frees the passed values with it. A pointwise launch may
// also write its output over an input of the same bytes that it reads for
// the last time, element by element (gelu_bwd, the GELU's input gradient
// over its input). What finds no such buffer (the first layer B reaches
// has read little by then) stays in the passed pool. A receive into the
// chunk's pools lands in a buffer of its own (LowerToExec's staged
// receives), since the slot is now freed by W: no receive waits for a free.
//
// The kept pool held until W is the held pool with more members, so the
// schedules' memory counts and the slot classes need nothing new: a cut
// chunk's pools are (0, kept + held, passed left over). LowerToExec
// compares the stage's slots both ways and keeps the fewer bytes.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/CudaKernel.h"
#include "compiler/passes/LowerToExec.h"
#include "runtime/plan/KernelCatalog.h"

#include <algorithm>
#include <set>

namespace strata::lower_to_exec {

namespace {

using Pool = exec::StashPool;

/// Where `need` bytes fit in `size` bytes around `taken` ([begin, end)
/// ranges, sorted): the lowest aligned offset, or -1.
int64_t fitIn(int64_t size, int64_t need,
              const std::vector<std::pair<int64_t, int64_t>> &taken) {
  int64_t at = 0;
  for (auto [begin, end] : taken) {
    if (at + need <= begin)
      return at;
    at = std::max(at, exec::alignToArena(end));
  }
  return at + need <= size ? at : -1;
}

} // namespace

std::string freedEventName(int64_t chunk, exec::StashPool pool) {
  return "freed:chunk" + std::to_string(chunk) +
         (pool == Pool::UntilBackward
              ? std::string()
              : (":" + exec::stringifyStashPool(pool)).str());
}

PassedInPlace planPassedInPlace(exec::TemplateOp stage, int64_t stages) {
  PassedInPlace plan;
  Block &block = stage.getBody().front();
  llvm::StringMap<exec::BufferOp> byName;
  for (auto buffer : block.getOps<exec::BufferOp>())
    byName[buffer.getSymName()] = buffer;
  auto rootOf = [&](StringRef name) {
    exec::BufferOp buffer = byName.lookup(name);
    if (buffer && buffer.getAlias())
      return byName.lookup(*buffer.getAlias());
    return buffer;
  };
  // A buffer viewed per rank, or whose views are, keeps its own bytes.
  llvm::DenseSet<Operation *> perRank;
  for (auto buffer : block.getOps<exec::BufferOp>())
    if (buffer.getPerRankAttr())
      if (exec::BufferOp root = rootOf(buffer.getSymName()))
        perRank.insert(root);
  std::set<int64_t> cut;
  for (auto program : block.getOps<exec::ProgramOp>())
    if (program.getPhase() == exec::Phase::Weight && program.getChunk())
      cut.insert(int64_t(*program.getChunk()));
  auto members = exec::stashMembers(stage);

  for (auto program : block.getOps<exec::ProgramOp>()) {
    if (program.getPhase() != exec::Phase::Backward || !program.getChunk() ||
        !cut.count(int64_t(*program.getChunk())))
      continue;
    int64_t chunk = int64_t(*program.getChunk()), group = chunk / stages;
    // Each stash buffer's first and last instruction in B; those a transfer
    // names (on the communication stream, outside B's order) are left. A
    // pointwise launch may write its output over an input of the same
    // bytes that it reads for the last time (each element is read before
    // it is written, as FusionRule.h allows within a fused kernel).
    llvm::DenseMap<Operation *, int64_t> first, last;
    llvm::DenseSet<Operation *> transferred;
    llvm::DenseMap<Operation *, SmallVector<Operation *, 2>> overwritable;
    int64_t index = 0;
    for (Operation &op : program.getBody().front()) {
      if (auto launch = dyn_cast<exec::LaunchOp>(op);
          launch && launch.getOutputs().size() == 1 && !launch.getPerRank()) {
        int id = runtime::findKernel(launch.getKernel().str());
        exec::BufferOp out = byName.lookup(
            cast<FlatSymbolRefAttr>(launch.getOutputs()[0]).getValue());
        // Not a copy (memcpy onto itself), nor an input the launch also
        // reads through another operand (a broadcast view of it is read at
        // other elements than the one being written).
        if (id >= 0 && codegen::isPointwise(runtime::KernelId(id)) &&
            runtime::KernelId(id) != runtime::KernelId::Copy && out &&
            !out.getAlias())
          for (Attribute input : launch.getInputs()) {
            exec::BufferOp in =
                byName.lookup(cast<FlatSymbolRefAttr>(input).getValue());
            if (!in || in.getAlias() ||
                in.getTensorType() != out.getTensorType())
              continue;
            int64_t named = llvm::count_if(
                exec::launchOperands(launch), [&](FlatSymbolRefAttr ref) {
                  return rootOf(ref.getValue()) == in;
                });
            if (named == 1)
              overwritable[out].push_back(in);
          }
      }
      SmallVector<FlatSymbolRefAttr> refs;
      exec::instructionBuffers(&op, refs, refs);
      bool comm = exec::instructionStream(&op) != exec::Stream::Compute;
      for (FlatSymbolRefAttr ref : refs) {
        exec::BufferOp root = rootOf(ref.getValue());
        if (!root || root.getArena() != exec::Arena::Stash)
          continue;
        first.try_emplace(root, index);
        last[root] = index;
        if (comm)
          transferred.insert(root);
      }
      ++index;
    }
    auto usable = [&](exec::BufferOp buffer) {
      return !transferred.contains(buffer) && !perRank.contains(buffer);
    };
    struct Host {
      exec::BufferOp buffer;
      int64_t lastRead;
      std::vector<std::pair<int64_t, int64_t>> taken;
    };
    std::vector<Host> hosts;
    for (exec::BufferOp kept : members[{group, Pool::UntilBackward}])
      if (usable(kept))
        hosts.push_back({kept, last.lookup(kept), {}}); // unread: 0, before any
    SmallVector<exec::BufferOp> guests;
    for (exec::BufferOp passed : members[{group, Pool::Passed}])
      if (usable(passed) && first.count(passed))
        guests.push_back(passed);
    // In the order B writes them, each into the kept buffer it fits best.
    llvm::stable_sort(guests, [&](exec::BufferOp a, exec::BufferOp b) {
      return first.lookup(a) < first.lookup(b);
    });
    SmallVector<PassedInPlace::Placement> placed;
    for (exec::BufferOp guest : guests) {
      int64_t need = guest.getBytes(), written = first.lookup(guest);
      Host *best = nullptr;
      int64_t bestAt = -1, bestLeft = 0;
      for (Host &host : hosts) {
        bool read = last.count(host.buffer);
        int64_t at;
        if (read && host.lastRead == written &&
            llvm::is_contained(overwritable.lookup(guest),
                               host.buffer.getOperation()))
          at =
              host.taken.empty() ? 0 : -1; // the same bytes, element by element
        else if (read && host.lastRead >= written)
          continue;
        else
          at = fitIn(host.buffer.getBytes(), need, host.taken);
        if (at < 0)
          continue;
        int64_t left = host.buffer.getBytes() - need;
        if (!best || left < bestLeft) {
          best = &host;
          bestAt = at;
          bestLeft = left;
        }
      }
      if (!best)
        continue;
      best->taken.push_back({bestAt, bestAt + need});
      llvm::sort(best->taken);
      placed.push_back({guest, best->buffer, bestAt});
    }
    if (!placed.empty())
      plan.byGroup[group] = {chunk, std::move(placed)};
  }
  return plan;
}

void stashKeyBytes(exec::TemplateOp stage, const PassedInPlace &plan,
                   std::map<pipeline::StashKey, int64_t> &bytes,
                   std::map<pipeline::StashKey, int64_t> &landing) {
  bytes.clear();
  landing.clear();
  llvm::DenseSet<Operation *> guests;
  for (auto &[group, chunk] : plan.byGroup)
    for (const PassedInPlace::Placement &p : chunk.placed)
      guests.insert(p.passed);
  // A kept buffer of a chunk in place is held until W.
  auto poolOf = [&](exec::BufferOp buffer) {
    Pool pool = buffer.getPool();
    if (pool == Pool::UntilBackward &&
        plan.byGroup.count(int64_t(buffer.getStashGroup().value_or(0))))
      return Pool::Held;
    return pool;
  };
  std::map<pipeline::StashKey, SmallVector<exec::BufferOp>> members;
  for (auto &[key, list] : exec::stashMembers(stage))
    for (exec::BufferOp buffer : list)
      if (!guests.contains(buffer))
        members[{key.first, int(poolOf(buffer))}].push_back(buffer);
  for (auto &[key, list] : members)
    bytes[key] = exec::stashSlotBytes(list);
  // What a pool's receives would cost if it shared its slots.
  llvm::StringMap<exec::BufferOp> byName;
  Block &block = stage.getBody().front();
  for (auto buffer : block.getOps<exec::BufferOp>())
    byName[buffer.getSymName()] = buffer;
  for (auto program : block.getOps<exec::ProgramOp>())
    for (auto recv : program.getBody().front().getOps<exec::RecvOp>())
      if (exec::BufferOp target = byName.lookup(recv.getBuffer());
          target && target.getArena() == exec::Arena::Stash &&
          !target.getAlias()) {
        int64_t &extra = landing[{int64_t(target.getStashGroup().value_or(0)),
                                  int(poolOf(target))}];
        extra = exec::alignToArena(extra + target.getBytes());
      }
}

LogicalResult Lowering::placePassedInPlace(exec::TemplateOp stage,
                                           const PassedInPlace &plan) {
  Block &block = stage.getBody().front();
  // Views of a guest view the kept buffer it lies in.
  llvm::StringMap<exec::BufferOp> byName;
  for (auto buffer : block.getOps<exec::BufferOp>())
    byName[buffer.getSymName()] = buffer;
  llvm::DenseMap<Operation *, SmallVector<exec::BufferOp>> viewsOf;
  for (auto buffer : block.getOps<exec::BufferOp>())
    if (auto alias = buffer.getAlias())
      if (exec::BufferOp root = byName.lookup(*alias))
        viewsOf[root].push_back(buffer);
  auto members = exec::stashMembers(stage);
  for (auto &[group, chunkPlan] : plan.byGroup) {
    for (PassedInPlace::Placement p : chunkPlan.placed) {
      auto host = FlatSymbolRefAttr::get(p.host.getSymNameAttr());
      for (exec::BufferOp view : viewsOf.lookup(p.passed)) {
        view.setAliasAttr(host);
        view.setViewOffsetAttr(b.getI64IntegerAttr(
            p.offset + int64_t(view.getViewOffset().value_or(0))));
      }
      p.passed.setAliasAttr(host);
      if (p.offset)
        p.passed.setViewOffsetAttr(b.getI64IntegerAttr(p.offset));
      p.passed.removeStashGroupAttr();
      p.passed.removeStashPoolAttr();
    }
    for (exec::BufferOp kept : members[{group, Pool::UntilBackward}])
      kept.setStashPoolAttr(exec::StashPoolAttr::get(ctx(), Pool::Held));
    // B no longer frees the kept pool, and the chunk's receives land in
    // buffers of their own (lowerSchedule stages them): what waited for
    // B's free waits for nothing, and B records it no more.
    auto keptFreed = slotFreed.find({chunkPlan.chunk, Pool::UntilBackward});
    if (keptFreed == slotFreed.end() || !keptFreed->second)
      continue;
    exec::EventOp gone = keptFreed->second;
    slotFreed.erase(keptFreed);
    for (auto program : block.getOps<exec::ProgramOp>())
      for (Operation &op :
           llvm::make_early_inc_range(program.getBody().front()))
        if ((isa<exec::WaitOp>(op) &&
             cast<exec::WaitOp>(op).getEvent() == gone.getSymName()) ||
            (isa<exec::RecordOp>(op) &&
             cast<exec::RecordOp>(op).getEvent() == gone.getSymName()))
          op.erase();
    gone.erase();
  }
  return success();
}

} // namespace strata::lower_to_exec
