//===- FusionRule.cpp - when pointwise launches may be one kernel ---------===//
#include "compiler/passes/FusionRule.h"
#include "compiler/codegen/CudaKernel.h"

namespace strata::fusion {

using namespace mlir;

namespace {

/// At most this many launches a group: a kernel's parameters stay small.
constexpr size_t kMaxMembers = 16;

using Place = exec::BufferPlace;

} // namespace

std::optional<Member> memberOf(exec::LaunchOp launch,
                               const llvm::StringMap<exec::BufferOp> &byName) {
  int id = runtime::findKernel(launch.getKernel().str());
  if (id < 0 || launch.getPerRank())
    return std::nullopt;
  bool closing = codegen::closesFusedGroup(runtime::KernelId(id));
  if (!closing && !codegen::isPointwise(runtime::KernelId(id)))
    return std::nullopt;
  Member member;
  member.launch = launch;
  member.closing = closing;
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

bool fits(ArrayRef<Member> group, const Member &next) {
  // (An op handle's accessors are not const: copies of the handles.)
  exec::LaunchOp first = group.front().launch, launch = next.launch;
  if (group.size() >= kMaxMembers || next.elements != group.front().elements ||
      launch.getWhen() != first.getWhen())
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

bool closes(ArrayRef<Member> group, const Member &last) {
  if (!fits(group, last) || last.read.empty())
    return false;
  for (const Member &member : group)
    for (const Place &w : member.written)
      if (w == last.read.front())
        return true;
  return false;
}

std::string checkGroup(ArrayRef<exec::LaunchOp> group,
                       const llvm::StringMap<exec::BufferOp> &byName) {
  SmallVector<Member> members;
  for (exec::LaunchOp launch : group) {
    std::string which = "member " + std::to_string(members.size()) + " ('" +
                        launch.getKernel().str() + "')";
    std::optional<Member> member = memberOf(launch, byName);
    if (!member)
      return which + " is not a pointwise launch or a norm's forward";
    bool last = members.size() + 1 == group.size();
    if (member->closing && (!last || members.empty()))
      return which + ": a norm only closes a group";
    if (!members.empty() &&
        !(member->closing ? closes(members, *member) : fits(members, *member)))
      return which + " touches bytes that another thread of one kernel "
                     "would write (or differs in elements or condition)";
    members.push_back(*member);
  }
  return "";
}

} // namespace strata::fusion
