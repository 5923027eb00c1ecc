//===- CudaCodegen.cpp - a CUDA kernel for every launch -------------------===//
//
// The pass reads each launch's operands off its buffers and hands a plain
// description to the emitters (compiler/codegen/CudaKernel.h); equal
// translation units are emitted once.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "compiler/codegen/CudaKernel.h"
#include "compiler/codegen/Nvrtc.h"
#include "compiler/passes/FusionRule.h"
#include "dialects/exec/ExecDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <map>

namespace strata {
#define GEN_PASS_DEF_CUDACODEGEN
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

std::optional<runtime::DType> dtypeOf(Type type) {
  Type element = cast<ShapedType>(type).getElementType();
  if (element.isF32())
    return runtime::DType::F32;
  if (element.isBF16())
    return runtime::DType::BF16;
  if (element.isInteger(32))
    return runtime::DType::I32;
  return std::nullopt;
}

/// The launch as the emitters see it.
FailureOr<codegen::LaunchDesc>
describe(exec::LaunchOp launch,
         const llvm::StringMap<exec::BufferOp> &buffers) {
  int id = runtime::findKernel(launch.getKernel().str());
  if (id < 0)
    return launch.emitOpError() << "launches no kernel of the catalog";
  codegen::LaunchDesc desc;
  desc.kernel = runtime::KernelId(id);
  const runtime::KernelSpec &spec = runtime::kernelSpec(desc.kernel);
  SmallVector<FlatSymbolRefAttr> names = exec::launchOperands(launch);
  for (size_t i = 0; i < spec.operands.size(); ++i) {
    codegen::OperandDesc operand;
    if (i >= names.size()) {
      operand.present = false; // an optional output left out
      desc.operands.push_back(operand);
      continue;
    }
    StringRef name = names[i].getValue();
    exec::BufferOp buffer = buffers.lookup(name);
    if (!buffer)
      return launch.emitOpError() << "names no buffer '" << name << "'";
    auto type = dyn_cast<RankedTensorType>(buffer.getType());
    std::optional<runtime::DType> dtype = type ? dtypeOf(type) : std::nullopt;
    if (!dtype)
      return launch.emitOpError()
             << "operand '" << name << "' has a type no kernel takes";
    operand.dtype = *dtype;
    operand.shape.assign(type.getShape().begin(), type.getShape().end());
    desc.operands.push_back(operand);
  }
  for (const runtime::AttrSpec &attrSpec : spec.attrs) {
    exec::LaunchArgument argument = exec::launchArgument(launch, attrSpec.name);
    codegen::AttrDesc attr;
    attr.i = argument.i;
    attr.f = argument.f;
    attr.list.assign(argument.list.begin(), argument.list.end());
    attr.perRank = bool(argument.perRank);
    desc.attrs.push_back(std::move(attr));
  }
  return desc;
}

struct CudaCodegenPass : public strata::impl::CudaCodegenBase<CudaCodegenPass> {
  using CudaCodegenBase::CudaCodegenBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!codegen::isCudaArch(arch)) {
      module.emitError() << "unknown CUDA architecture '" << arch << "' ("
                         << codegen::kCudaArchs << ")";
      return signalPassFailure();
    }
    // What cuBLASLt's epilogues compute differently from the plan's meaning
    // (an exec-level input lowered for the CPU) must not reach a GPU.
    WalkResult epilogues =
        module.walk([&](exec::GemmOp gemm) {
          exec::Epilogue epilogue = gemm.getEpilogue();
          if (epilogue != exec::Epilogue::GeluBias &&
              epilogue != exec::Epilogue::BiasGrad)
            return WalkResult::advance();
          gemm.emitOpError()
              << "epilogue " << exec::stringifyEpilogue(epilogue)
              << " has no cuBLASLt equivalent (its GELU is the tanh form, its "
                 "bias gradient overwrites): lower for the CUDA target with "
                 "--strata-fuse-epilogues=bias-only, as strata-compile "
                 "--target cuda does";
          return WalkResult::interrupt();
        });
    if (epilogues.wasInterrupted())
      return signalPassFailure();
    // Code made before (strata-opt may run this pass again) goes first.
    exec::clearGeneratedCode(module);
    Builder b(module.getContext());
    // Each distinct unit once: its name by the unit's text.
    std::map<std::string, std::string> nameOf;
    std::vector<std::pair<std::string, std::string>> codes; // name, kernel
    std::vector<std::string> sources;
    llvm::StringMap<int> perKernel;
    for (auto stage : module.getOps<exec::TemplateOp>()) {
      llvm::StringMap<exec::BufferOp> buffers;
      for (auto buffer : stage.getBody().front().getOps<exec::BufferOp>())
        buffers[buffer.getSymName()] = buffer;
      // The members of a fused group after its first launch: computed by
      // the first's code, they have none of their own (the verifier holds
      // them to it).
      llvm::DenseSet<Operation *> members;
      WalkResult walked = stage.walk([&](exec::LaunchOp launch) {
        if (members.contains(launch))
          return WalkResult::advance();
        FailureOr<SmallVector<exec::LaunchOp>> group = exec::fusedGroup(launch);
        if (failed(group))
          return WalkResult::interrupt();
        // A group written by hand (or by another tool) keeps the rule
        // strata-fuse-elementwise groups by, or it would race.
        if (group->size() > 1)
          if (std::string error = fusion::checkGroup(*group, buffers);
              !error.empty()) {
            launch.emitOpError()
                << "fuses " << group->size()
                << " launches that cannot be one kernel: " << error;
            return WalkResult::interrupt();
          }
        // A fused kernel's operands by their bytes: two names of the same
        // elements are one value (a register must not go stale).
        std::vector<std::pair<std::optional<exec::BufferPlace>, StringRef>>
            seen;
        auto bufferId = [&](StringRef name) {
          std::optional<exec::BufferPlace> place =
              exec::bufferPlace(buffers.lookup(name), buffers);
          for (size_t i = 0; i < seen.size(); ++i)
            if (place ? seen[i].first == place
                      : !seen[i].first && seen[i].second == name)
              return int(i);
          seen.push_back({place, name});
          return int(seen.size() - 1);
        };
        std::vector<codegen::FusedMember> fused;
        for (exec::LaunchOp member : *group) {
          FailureOr<codegen::LaunchDesc> desc = describe(member, buffers);
          if (failed(desc))
            return WalkResult::interrupt();
          codegen::FusedMember &entry = fused.emplace_back();
          entry.launch = std::move(*desc);
          if (group->size() > 1)
            for (FlatSymbolRefAttr name : exec::launchOperands(member))
              entry.buffers.push_back(bufferId(name.getValue()));
          if (member != launch)
            members.insert(member);
        }
        codegen::KernelCode code;
        std::string error = fused.size() > 1
                                ? codegen::emitFused(fused, code)
                                : codegen::emitKernel(fused[0].launch, code);
        if (!error.empty()) {
          launch.emitOpError() << "has no CUDA kernel: " << error;
          return WalkResult::interrupt();
        }
        auto unit = [&](const std::string &name) {
          return fused.size() > 1
                     ? codegen::fusedUnit(fused, code, name)
                     : codegen::kernelUnit(fused[0].launch, code, name);
        };
        std::string key = unit("kernel");
        auto [it, fresh] = nameOf.try_emplace(key, "");
        if (fresh) {
          std::vector<runtime::KernelId> kernels;
          for (const codegen::FusedMember &member : fused)
            kernels.push_back(member.launch.kernel);
          std::string kernel = runtime::fusedKernelName(kernels);
          std::string prefix =
              fused.size() > 1 ? "fused" : launch.getKernel().str();
          it->second = prefix + "_" + std::to_string(perKernel[prefix]++);
          codes.push_back({it->second, kernel});
          sources.push_back(unit(it->second));
        }
        auto dims = [&](const std::array<uint32_t, 3> &d) {
          return b.getDenseI64ArrayAttr({d[0], d[1], d[2]});
        };
        launch.setGridAttr(dims(code.grid));
        launch.setBlockAttr(dims(code.block));
        if (code.sharedBytes)
          launch.setSharedBytesAttr(b.getI64IntegerAttr(code.sharedBytes));
        launch.setCodeAttr(b.getStringAttr(it->second));
        return WalkResult::advance();
      });
      if (walked.wasInterrupted())
        return signalPassFailure();
    }
    OpBuilder builder = OpBuilder::atBlockEnd(module.getBody());
    for (size_t i = 0; i < codes.size(); ++i)
      exec::CodeOp::create(builder, module.getLoc(), codes[i].first,
                           codes[i].second, sources[i], StringAttr());
    module->setAttr(exec::kCudaArchAttr, b.getStringAttr(arch));
  }
};

} // namespace
