//===- FusionRule.h - when pointwise launches may be one kernel -*- C++ -*-===//
//
// A group is safe to run as one kernel when each element of every buffer
// it touches is read and written by one thread, in the members' order:
// the fused kernel's thread i runs every member on element i. Memory
// planning lets buffers whose lives do not overlap share bytes, so the
// rule is on bytes, not names: whatever the group writes must either be
// exactly the bytes of another operand (the same elements, the same
// dtype) or not overlap it, and a broadcast operand (read at i modulo its
// size by many threads) must not overlap anything written.
//
// A norm's forward closes a group when it normalizes what the group
// writes (the residual add before a norm): its warp for a row runs the
// members on the row's elements first, then the norm, and lane c % 32 of
// row r's warp is the one thread that touches element r * cols + c of
// every buffer of the group's element count, as in the members' loop.
// The same rule on bytes holds: the norm's output may be exactly the
// bytes of a buffer the group used.
//
// strata-fuse-elementwise forms groups by it; strata-cuda-codegen checks
// every `fuses N` by it (exec IR may come from elsewhere).
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_COMPILER_PASSES_FUSIONRULE_H
#define STRATA_COMPILER_PASSES_FUSIONRULE_H

#include "dialects/exec/ExecDialect.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"

#include <optional>
#include <string>

namespace strata::fusion {

/// A launch as a group sees it: what it writes, what it reads at the
/// output's element, what it reads broadcast; whether it can only close a
/// group (a norm).
struct Member {
  exec::LaunchOp launch;
  bool closing = false;
  int64_t elements = 0;
  llvm::SmallVector<exec::BufferPlace> written, read, broadcast;
};

/// `launch` as a pointwise member or a group's closing norm.
std::optional<Member> memberOf(exec::LaunchOp launch,
                               const llvm::StringMap<exec::BufferOp> &byName);

/// Whether `next` may join `group`: one thread per element still sees
/// every element it reads as the members, in order, leave it.
bool fits(llvm::ArrayRef<Member> group, const Member &next);

/// Whether the norm `last` may close `group`: it fits as a member would
/// (its weight and bias, read by every row, are broadcast operands), and
/// its input is bytes the group writes.
bool closes(llvm::ArrayRef<Member> group, const Member &last);

/// Whether the launches of a `fuses N` group keep the rule; "" or why not.
std::string checkGroup(llvm::ArrayRef<exec::LaunchOp> group,
                       const llvm::StringMap<exec::BufferOp> &byName);

} // namespace strata::fusion

#endif
