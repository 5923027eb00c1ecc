//===- OverlapCommunication.cpp - data-parallel traffic beside compute ----===//
//
// The exec lowering leaves the data-parallel communication where it is
// simplest to be right: every bucket's gradient reduction in @optimizer
// before the gradients are read, the distributed optimizer's parameter
// all-gathers after the update, all on the compute stream. This pass moves
// them onto the communication stream, ordered against the compute stream by
// events, as Megatron's --overlap-grad-reduce and --overlap-param-gather do:
//
//   overlap-grad-reduce: a data-parallel reduction of @optimizer that reads
//     gradients no instruction before it in @optimizer writes moves to
//     right after the last microbatch's last write of them (found in the
//     schedule's order), on the communication stream, in the last
//     microbatch only:
//       record @written:N; wait @written:N (comm); reduce (comm)
//     Each program that issues reductions records @reduced:P after its
//     last, and @optimizer waits for every @reduced:P before anything else.
//     (Gradients another collective finishes first, a tied parameter's or
//     a partial sum's, stay: their reduction has to follow it.)
//   overlap-param-gather: the all-gathers run on the communication stream
//     after @updated, each recording @gathered:N; every program waits for
//     @gathered:N before its first read of those parameters.
//
// Pipeline transfers are on the communication stream already: their events
// are part of what a transfer means, and the lowering places them.
//
//===----------------------------------------------------------------------===//
#include "compiler/Mesh.h"
#include "compiler/Passes.h"
#include "dialects/exec/ExecDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

namespace strata {
#define GEN_PASS_DEF_OVERLAPCOMMUNICATION
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

using Range = std::pair<int64_t, int64_t>; // elements [begin, end)

/// The buffer an instruction's operand names, and the root it views.
struct Buffers {
  llvm::StringMap<exec::BufferOp> byName;

  exec::BufferOp root(exec::BufferOp buffer) const {
    if (auto alias = buffer.getAlias())
      return byName.lookup(*alias);
    return buffer;
  }
  /// The elements of `buffer`'s root that `buffer` covers.
  Range range(exec::BufferOp buffer) const {
    int64_t element =
        exec::elementBytes(buffer.getTensorType().getElementType());
    int64_t begin = int64_t(buffer.getViewOffset().value_or(0)) / element;
    return {begin, begin + buffer.getTensorType().getNumElements()};
  }
  /// The ranges of `region` that `op` reads (or writes).
  SmallVector<Range> touches(Operation &op, exec::BufferOp region,
                             bool writing) const {
    SmallVector<FlatSymbolRefAttr> reads, writes;
    exec::instructionBuffers(&op, reads, writes);
    SmallVector<Range> ranges;
    for (FlatSymbolRefAttr ref : writing ? writes : reads)
      if (exec::BufferOp buffer = byName.lookup(ref.getValue());
          buffer && root(buffer) == region)
        ranges.push_back(range(buffer));
    return ranges;
  }
};

bool overlaps(Range a, Range b) {
  return a.first < b.second && b.first < a.second;
}

/// A bucket's data-parallel collective in @optimizer (exec.bucket), over a
/// view of a region.
struct Traffic {
  exec::CollectiveOp op;
  exec::BufferOp region; // its root
  Range range;           // what it reduces or gathers into, in the region
  int64_t index;         // its bucket
  bool movable = true;   // nothing before it in @optimizer writes its range
};

/// The traffic whose ranges `range` overlaps, for `fn`: `traffic` tiles one
/// region in order (the buckets), so a binary search finds the first, and
/// a range overlaps few.
template <typename Fn>
void forEachOverlapping(ArrayRef<Traffic> traffic, Range range, Fn fn) {
  const Traffic *it = llvm::partition_point(
      traffic, [&](const Traffic &t) { return t.range.second <= range.first; });
  for (; it != traffic.end() && it->range.first < range.second; ++it)
    fn(*it);
}

class Overlap {
public:
  Overlap(exec::TemplateOp stage, bool gradReduce, bool paramGather)
      : stage(stage), b(stage.getContext()), gradReduce(gradReduce),
        paramGather(paramGather) {}

  LogicalResult run();

private:
  exec::EventOp event(StringRef name) {
    OpBuilder at(firstProgram);
    return exec::EventOp::create(at, stage.getLoc(), b.getStringAttr(name));
  }
  void record(OpBuilder &at, exec::EventOp event, exec::Stream stream,
              bool lastMicrobatch) {
    exec::recordEvent(at, stage.getLoc(), event, stream, lastMicrobatch);
  }
  void wait(OpBuilder &at, exec::EventOp event, exec::Stream stream,
            bool lastMicrobatch) {
    exec::waitEvent(at, stage.getLoc(), event, stream, lastMicrobatch);
  }
  LogicalResult overlapReductions(ArrayRef<Traffic> reductions);
  void overlapGathers(ArrayRef<Traffic> gathers);

  exec::TemplateOp stage;
  OpBuilder b;
  bool gradReduce, paramGather;
  Buffers buffers;
  Operation *firstProgram = nullptr;
  exec::ProgramOp optimizer;
  llvm::StringMap<exec::ProgramOp> programs;
};

LogicalResult Overlap::run() {
  Block &body = stage.getBody().front();
  for (auto buffer : body.getOps<exec::BufferOp>())
    buffers.byName[buffer.getSymName()] = buffer;
  for (auto program : body.getOps<exec::ProgramOp>()) {
    if (!firstProgram)
      firstProgram = program;
    programs[program.getSymName()] = program;
    if (program.getPhase() == exec::Phase::Optimizer)
      optimizer = program;
  }
  if (!optimizer)
    return success();

  // The optimizer's bucket traffic (exec.bucket), and whether an
  // instruction before a reduction writes what it reduces.
  SmallVector<Traffic> reductions, gathers;
  SmallVector<std::pair<exec::BufferOp, Range>> written; // region, range
  for (Operation &op : optimizer.getBody().front()) {
    auto collective = dyn_cast<exec::CollectiveOp>(op);
    IntegerAttr bucket = collective
                             ? exec::bucket(b.getContext()).getAttr(collective)
                             : IntegerAttr();
    if (bucket &&
        exec::instructionStream(collective) == exec::Stream::Compute &&
        !collective.getWhen()) {
      exec::CollectiveKind kind = collective.getKind();
      exec::BufferOp in = buffers.byName.lookup(collective.getInput());
      exec::BufferOp out = buffers.byName.lookup(collective.getOutput());
      if (in && out && kind == exec::CollectiveKind::AllGather) {
        gathers.push_back({collective, buffers.root(out), buffers.range(out),
                           bucket.getInt()});
      } else if (in && (kind == exec::CollectiveKind::AllReduceSum ||
                        kind == exec::CollectiveKind::ReduceScatter)) {
        Traffic reduction{collective, buffers.root(in), buffers.range(in),
                          bucket.getInt()};
        for (auto [region, range] : written)
          if (region == reduction.region && overlaps(range, reduction.range))
            reduction.movable = false;
        reductions.push_back(reduction);
      }
    }
    SmallVector<FlatSymbolRefAttr> reads, writes;
    exec::instructionBuffers(&op, reads, writes);
    for (FlatSymbolRefAttr ref : writes)
      if (exec::BufferOp buffer = buffers.byName.lookup(ref.getValue()))
        written.push_back({buffers.root(buffer), buffers.range(buffer)});
  }
  // One region each, tiled in order by bucket: what the lowering writes.
  auto oneTiledRegion = [](ArrayRef<Traffic> traffic) {
    for (size_t i = 1; i < traffic.size(); ++i)
      if (traffic[i].region != traffic[0].region ||
          traffic[i].range.first < traffic[i - 1].range.second)
        return false;
    return true;
  };
  if (!oneTiledRegion(reductions) || !oneTiledRegion(gathers))
    return optimizer.emitOpError()
           << "has bucket reductions or gathers that do not tile one region "
              "in order: they cannot be overlapped";
  if (gradReduce && failed(overlapReductions(reductions)))
    return failure();
  if (paramGather)
    overlapGathers(gathers);
  return success();
}

LogicalResult Overlap::overlapReductions(ArrayRef<Traffic> reductions) {
  if (llvm::none_of(reductions, [](const Traffic &t) { return t.movable; }))
    return success();
  // The last microbatch's programs in schedule order.
  auto schedules = stage.getBody().front().getOps<exec::ScheduleOp>();
  if (schedules.empty())
    return stage.emitOpError() << "has no exec.schedule: the last "
                                  "microbatch's writers cannot be found";
  exec::ScheduleOp schedule = *schedules.begin();
  int64_t last = 0;
  for (auto run : schedule.getBody().front().getOps<exec::RunOp>())
    last = std::max<int64_t>(last, run.getMicrobatch().value_or(0));
  SmallVector<exec::ProgramOp> order;
  for (auto run : schedule.getBody().front().getOps<exec::RunOp>())
    if (run.getMicrobatch() && int64_t(*run.getMicrobatch()) == last)
      if (exec::ProgramOp program = programs.lookup(run.getProgram()))
        order.push_back(program);

  // Each reduction's last writer.
  exec::BufferOp region = reductions.front().region;
  SmallVector<Operation *> lastWriter(reductions.size(), nullptr);
  for (exec::ProgramOp program : order)
    for (Operation &op : program.getBody().front())
      for (Range written : buffers.touches(op, region, /*writing=*/true))
        forEachOverlapping(reductions, written, [&](const Traffic &t) {
          lastWriter[&t - reductions.data()] = &op;
        });

  // After each last writer, in the last microbatch: record on compute,
  // wait on comm, reduce on comm.
  llvm::DenseMap<Operation *, Operation *> lastReduction; // by program
  for (auto [reduction, writer] : llvm::zip(reductions, lastWriter)) {
    exec::CollectiveOp op = reduction.op;
    if (!reduction.movable)
      continue;
    if (!writer)
      return op.emitError()
             << "gradient bucket " << reduction.index << " of stage "
             << stage.getStage()
             << " is written by no backward: nothing would reduce it";
    OpBuilder after(writer->getContext());
    after.setInsertionPointAfter(writer);
    exec::EventOp written = event("written:" + std::to_string(reduction.index));
    record(after, written, exec::Stream::Compute, /*lastMicrobatch=*/true);
    wait(after, written, exec::Stream::Comm, /*lastMicrobatch=*/true);
    op->moveBefore(after.getBlock(), after.getInsertionPoint());
    exec::placeInstruction(op, exec::Stream::Comm, /*lastMicrobatch=*/true);
    Operation *&lastOfProgram =
        lastReduction[writer->getParentOfType<exec::ProgramOp>()];
    if (!lastOfProgram || lastOfProgram->isBeforeInBlock(op))
      lastOfProgram = op;
  }
  // Each program that issued reductions records when its last is done;
  // @optimizer waits for all of them before it reads a gradient.
  OpBuilder waits(optimizer.getContext());
  waits.setInsertionPointToStart(&optimizer.getBody().front());
  for (exec::ProgramOp program : order) {
    Operation *lastReduce = lastReduction.lookup(program);
    if (!lastReduce)
      continue;
    OpBuilder after(lastReduce->getContext());
    after.setInsertionPointAfter(lastReduce);
    exec::EventOp reduced = event(("reduced:" + program.getSymName()).str());
    record(after, reduced, exec::Stream::Comm, /*lastMicrobatch=*/true);
    wait(waits, reduced, exec::Stream::Compute, /*lastMicrobatch=*/false);
  }
  return success();
}

void Overlap::overlapGathers(ArrayRef<Traffic> gathers) {
  if (gathers.empty())
    return;
  // After the update, on the communication stream.
  exec::CollectiveOp first = gathers.front().op;
  OpBuilder before(first);
  exec::EventOp updated = event("updated");
  record(before, updated, exec::Stream::Compute, false);
  wait(before, updated, exec::Stream::Comm, false);
  SmallVector<exec::EventOp> gathered;
  for (const Traffic &gather : gathers) {
    exec::CollectiveOp op = gather.op;
    exec::placeInstruction(op, exec::Stream::Comm);
    OpBuilder after(op->getContext());
    after.setInsertionPointAfter(op);
    gathered.push_back(event("gathered:" + std::to_string(gather.index)));
    record(after, gathered.back(), exec::Stream::Comm, false);
  }
  // Each program waits for a gather before its first read of what it
  // gathers (in @optimizer, a read after the gathers).
  exec::CollectiveOp lastGather = gathers.back().op;
  for (auto program : stage.getBody().front().getOps<exec::ProgramOp>()) {
    Block &block = program.getBody().front();
    auto from = program == optimizer ? std::next(lastGather->getIterator())
                                     : block.begin();
    llvm::DenseSet<int64_t> waited;
    exec::BufferOp region = gathers.front().region;
    for (Operation &op :
         llvm::make_early_inc_range(llvm::make_range(from, block.end())))
      for (Range read : buffers.touches(op, region, /*writing=*/false))
        forEachOverlapping(gathers, read, [&](const Traffic &gather) {
          if (!waited.insert(gather.index).second)
            return;
          OpBuilder at(&op);
          wait(at, gathered[&gather - gathers.data()], exec::Stream::Compute,
               false);
        });
  }
}

struct OverlapCommunicationPass
    : strata::impl::OverlapCommunicationBase<OverlapCommunicationPass> {
  using OverlapCommunicationBase::OverlapCommunicationBase;

  void runOnOperation() override {
    for (auto stage : getOperation().getOps<exec::TemplateOp>())
      if (failed(Overlap(stage, overlapGradReduce, overlapParamGather).run()))
        return signalPassFailure();
  }
};

} // namespace
