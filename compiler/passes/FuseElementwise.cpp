//===- FuseElementwise.cpp - pointwise launches grouped into one kernel ---===//
//
// Runs of pointwise launches, and a norm's forward after them, grouped by
// the rule on bytes of FusionRule.h: `fuses N` on the first.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "compiler/passes/FusionRule.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

#include <optional>

namespace strata {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;
using namespace strata::fusion;

namespace {

struct FuseElementwisePass
    : public strata::impl::FuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Any earlier grouping goes, and any code made for it: the codegen
    // runs after this pass.
    module.walk([](exec::LaunchOp launch) { launch.removeFuseAttr(); });
    exec::clearGeneratedCode(module);
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
          if (member && !group.empty() &&
              (member->closing ? closes(group, *member)
                               : fits(group, *member))) {
            group.push_back(*member);
            if (member->closing)
              close();
            continue;
          }
          close();
          if (member && !member->closing)
            group.push_back(*member);
        }
        close();
      }
    }
  }
};

} // namespace
