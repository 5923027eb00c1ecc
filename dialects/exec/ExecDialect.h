//===- ExecDialect.h - the exec dialect -------------------------*- C++ -*-===//
#ifndef STRATA_DIALECTS_EXEC_EXECDIALECT_H
#define STRATA_DIALECTS_EXEC_EXECDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/RegionKindInterface.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"

#include <map>
#include <optional>

#include "dialects/exec/ExecDialect.h.inc"
#include "dialects/exec/ExecEnums.h.inc"

#define GET_OP_CLASSES
#include "dialects/exec/ExecOps.h.inc"

namespace strata::exec {

// The marks the exec lowering's passes leave each other (ExecOps.td's
// discardable attributes), by their generated helpers:
//   exec::absorbed(ctx).isAttrPresent(op)
inline ExecDialect::EpilogueAttrHelper epilogue(mlir::MLIRContext *c) {
  return ExecDialect::EpilogueAttrHelper(c);
}
inline ExecDialect::AbsorbedAttrHelper absorbed(mlir::MLIRContext *c) {
  return ExecDialect::AbsorbedAttrHelper(c);
}
inline ExecDialect::BucketAttrHelper bucket(mlir::MLIRContext *c) {
  return ExecDialect::BucketAttrHelper(c);
}

/// Puts instruction `op` on `stream` and, with `lastMicrobatch`, runs it
/// only in the last microbatch's run of its program.
void placeInstruction(mlir::Operation *op, Stream stream,
                      bool lastMicrobatch = false);

/// An exec.record or exec.wait of `event` at `at`, placed as above.
RecordOp recordEvent(mlir::OpBuilder &at, mlir::Location loc, EventOp event,
                     Stream stream, bool lastMicrobatch = false);
WaitOp waitEvent(mlir::OpBuilder &at, mlir::Location loc, EventOp event,
                 Stream stream, bool lastMicrobatch = false);

/// Bytes per element of a buffer: 2 for bf16, else 4 (f32, i32).
int64_t elementBytes(mlir::Type elementType);

/// The buffers an instruction reads and those it writes (a gemm that
/// accumulates reads its D too); none for an event or a non-instruction.
void instructionBuffers(mlir::Operation *op,
                        llvm::SmallVectorImpl<mlir::FlatSymbolRefAttr> &reads,
                        llvm::SmallVectorImpl<mlir::FlatSymbolRefAttr> &writes);

/// The stream an instruction runs on (compute unless it says; transfers
/// always on the communication stream); compute for a non-instruction.
Stream instructionStream(mlir::Operation *op);

/// A launch's operands in its kernel's order: inputs, then outputs (absent
/// optional outputs are the last and not listed).
llvm::SmallVector<mlir::FlatSymbolRefAttr> launchOperands(LaunchOp launch);

/// A verified launch's argument `name`, read as its catalog kind: `i` for
/// Int and Bool, `f` for Float, `list` for Ints; `perRank` its [axis,
/// stride (, axis, stride)] entry in `per_rank`, or null.
struct LaunchArgument {
  int64_t i = 0;
  double f = 0;
  llvm::ArrayRef<int64_t> list;
  mlir::Attribute perRank;
};
LaunchArgument launchArgument(LaunchOp launch, llvm::StringRef name);

/// `launch` and, when it fuses (`fuses N`), the launches its code computes
/// with it; failure, said at the op, when the ops after it are not such.
mlir::FailureOr<llvm::SmallVector<LaunchOp>> fusedGroup(LaunchOp launch);

/// Drops everything strata-cuda-codegen made in `module`: its code
/// objects, its architecture, and each launch's code, grid, block and
/// shared bytes.
void clearGeneratedCode(mlir::ModuleOp module);

/// The module attribute naming the CUDA architecture its code is for.
inline constexpr llvm::StringLiteral kCudaArchAttr = "strata.cuda_arch";

/// Where a planned buffer's bytes are, the same on every rank and in every
/// stash slot of a step: its root's arena (and stash group and pool, -1
/// outside the stash) and [begin, end), with its element type. Two buffers
/// with equal places are the same elements under two names. Stash buffers
/// of two pools (or chunks) never overlap within a step, whatever their
/// offsets: pools that share a slot class (the template's stash_classes)
/// lie in one region, but a step's live slots in it are distinct.
struct BufferPlace {
  Arena arena;
  int64_t stashGroup;
  int64_t stashPool = -1;
  int64_t begin, end;
  mlir::Type element;

  bool overlaps(const BufferPlace &other) const {
    return arena == other.arena && stashGroup == other.stashGroup &&
           stashPool == other.stashPool && begin < other.end &&
           other.begin < end;
  }
  bool operator==(const BufferPlace &other) const {
    return arena == other.arena && stashGroup == other.stashGroup &&
           stashPool == other.stashPool && begin == other.begin &&
           end == other.end && element == other.element;
  }
};
/// Arena offsets and stash slots are aligned to a cache line (CUDA wants
/// 256 later).
inline constexpr int64_t kArenaAlignment = 64;
inline int64_t alignToArena(int64_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

/// A template's stash buffers (roots, not views) by (stash group, pool),
/// each list in the template's order: one slot of that chunk's pool.
std::map<std::pair<int64_t, StashPool>, llvm::SmallVector<BufferOp>>
stashMembers(TemplateOp stage);

/// The bytes of one slot made of `members` laid end to end, each aligned.
int64_t stashSlotBytes(llvm::ArrayRef<BufferOp> members);

/// `buffer`'s place, looking up aliases in `byName`; nothing for a buffer
/// placed per rank (its bytes differ between ranks) or not yet planned.
std::optional<BufferPlace> bufferPlace(BufferOp buffer,
                                       const llvm::StringMap<BufferOp> &byName);

/// A `per_rank` value: [axis, stride], the stride a value grows by per
/// coordinate of the rank along mesh axis 0 (tp), 1 (dp), 2 (pp) or 3
/// (cp), or two such terms (a rank's place in a group over two axes).
mlir::LogicalResult verifyPerRank(mlir::Operation *op, mlir::Attribute value);

} // namespace strata::exec

#endif
