//===- FuseElementwise.cpp - pointwise launches grouped into one kernel ---===//
//
// A group is safe to run as one kernel when each element of every buffer
// it touches is read and written by one thread, in the members' order:
// the fused kernel's thread i runs every member on element i. Memory
// planning lets buffers whose lives do not overlap share bytes, so the
// check is on bytes, not names: whatever the group writes must either be
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
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "compiler/codegen/CudaKernel.h"
#include "dialects/exec/ExecDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

#include <optional>

namespace strata {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

/// At most this many launches a group: a kernel's parameters stay small.
constexpr size_t kMaxMembers = 16;

using Place = exec::BufferPlace;

/// A launch as the group sees it: what it writes, what it reads at the
/// output's element, what it reads broadcast.
struct Member {
  exec::LaunchOp launch;
  int64_t elements = 0;
  SmallVector<Place> written, read, broadcast;
};

/// `launch` as a pointwise member, or with `closing` as a group's last.
std::optional<Member> memberOf(exec::LaunchOp launch,
                               const llvm::StringMap<exec::BufferOp> &byName,
                               bool closing = false) {
  int id = runtime::findKernel(launch.getKernel().str());
  if (id < 0 || launch.getPerRank())
    return std::nullopt;
  if (!(closing ? codegen::closesFusedGroup(runtime::KernelId(id))
                : codegen::isPointwise(runtime::KernelId(id))))
    return std::nullopt;
  Member member;
  member.launch = launch;
  auto place = [&](Attribute ref) -> std::optional<Place> {
    exec::BufferOp buffer =
        byName.lookup(cast<FlatSymbolRefAttr>(ref).getValue());
    if (!buffer)
      return std::nullopt;
    return exec::bufferPlace(buffer, byName);
  };
  auto elements = [&](Attribute ref) {
    return byName.lookup(cast<FlatSymbolRefAttr>(ref).getValue())
        .getTensorType()
        .getNumElements();
  };
  if (launch.getOutputs().size() != 1)
    return std::nullopt;
  Attribute output = launch.getOutputs()[0];
  std::optional<Place> out = place(output);
  if (!out)
    return std::nullopt;
  member.elements = elements(output);
  member.written.push_back(*out);
  for (Attribute input : launch.getInputs()) {
    std::optional<Place> in = place(input);
    if (!in)
      return std::nullopt;
    (elements(input) == member.elements ? member.read : member.broadcast)
        .push_back(*in);
  }
  // accumulate reads its output too: the same bytes, at the same element.
  return member;
}

/// Whether `next` may join `group`: one thread per element still sees
/// every element it reads as the members, in order, leave it.
bool fits(ArrayRef<Member> group, Member next) {
  Member first = group.front();
  if (group.size() >= kMaxMembers || next.elements != first.elements ||
      next.launch.getWhen() != first.launch.getWhen())
    return false;
  SmallVector<Place> written, touched, broadcast;
  auto add = [&](const Member &member) {
    written.append(member.written);
    touched.append(member.written);
    touched.append(member.read);
    broadcast.append(member.broadcast);
  };
  for (const Member &member : group)
    add(member);
  add(next);
  for (const Place &w : written) {
    for (const Place &p : touched)
      if (w.overlaps(p) && !(w == p))
        return false;
    for (const Place &b : broadcast)
      if (w.overlaps(b))
        return false;
  }
  return true;
}

/// Whether the norm `last` may close `group`: it fits as a member would
/// (its weight and bias, read by every row, are broadcast operands), and
/// its input is bytes the group writes.
bool closes(ArrayRef<Member> group, const Member &last) {
  if (!fits(group, last) || last.read.empty())
    return false;
  for (const Member &member : group)
    for (const Place &w : member.written)
      if (w == last.read.front())
        return true;
  return false;
}

struct FuseElementwisePass
    : public strata::impl::FuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Any earlier grouping goes, and any code made for it: the codegen
    // runs after this pass.
    module.walk([](exec::LaunchOp launch) {
      launch.removeFuseAttr();
      exec::clearGeneratedCode(launch);
    });
    for (auto code : llvm::make_early_inc_range(module.getOps<exec::CodeOp>()))
      code.erase();
    module->removeAttr(exec::kCudaArchAttr);
    Builder b(module.getContext());
    for (auto stage : module.getOps<exec::TemplateOp>()) {
      llvm::StringMap<exec::BufferOp> byName;
      for (auto buffer : stage.getBody().front().getOps<exec::BufferOp>())
        byName[buffer.getSymName()] = buffer;
      for (auto program : stage.getBody().front().getOps<exec::ProgramOp>()) {
        SmallVector<Member> group;
        auto close = [&] {
          if (group.size() > 1)
            group.front().launch.setFuseAttr(
                b.getI64IntegerAttr(int64_t(group.size())));
          group.clear();
        };
        for (Operation &op : program.getBody().front()) {
          auto launch = dyn_cast<exec::LaunchOp>(op);
          std::optional<Member> member =
              launch ? memberOf(launch, byName) : std::nullopt;
          if (member && !group.empty() && fits(group, *member)) {
            group.push_back(*member);
            continue;
          }
          if (launch && !member && !group.empty())
            if (std::optional<Member> norm =
                    memberOf(launch, byName, /*closing=*/true);
                norm && closes(group, *norm)) {
              group.push_back(*norm);
              close();
              continue;
            }
          close();
          if (member)
            group.push_back(*member);
        }
        close();
      }
    }
  }
};

} // namespace
