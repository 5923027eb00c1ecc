//===- Mesh.cpp - the device mesh of a parallel layout --------------------===//
#include "compiler/Mesh.h"
#include "dialects/graph/GraphOps.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

namespace strata {

shard::GridOp ensureMesh(ModuleOp module) {
  if (auto grid = module.lookupSymbol<shard::GridOp>(kMeshName))
    return grid;
  OpBuilder b(module.getBodyRegion());
  b.setInsertionPointToStart(module.getBody());
  return shard::GridOp::create(b, module.getLoc(), kMeshName,
                               SmallVector<int64_t>(mesh::kAxisCount, 1));
}

void setMeshAxis(ModuleOp module, int16_t axis, int64_t size) {
  shard::GridOp grid = ensureMesh(module);
  SmallVector<int64_t> shape(grid.getShape());
  if (shape.size() <= size_t(axis))
    shape.resize(size_t(axis) + 1, 1);
  shape[size_t(axis)] = size;
  grid.setShape(shape);
}

int64_t meshAxis(ModuleOp module, int16_t axis) {
  auto grid = module.lookupSymbol<shard::GridOp>(kMeshName);
  return grid && size_t(axis) < grid.getShape().size()
             ? grid.getShape()[size_t(axis)]
             : 1;
}

// The attribute's name and its one value: looped is its absence.
static constexpr llvm::StringLiteral kPlacementAttr = "strata.chunk_placement";
static constexpr llvm::StringLiteral kVPlacement = "v";

sim::Placement chunkPlacement(ModuleOp module) {
  auto attr = module->getAttrOfType<StringAttr>(kPlacementAttr);
  return attr && attr.getValue() == kVPlacement ? sim::Placement::V
                                                : sim::Placement::Looped;
}

void setChunkPlacement(ModuleOp module, sim::Placement placement) {
  if (placement == sim::Placement::V)
    module->setAttr(kPlacementAttr,
                    StringAttr::get(module.getContext(), kVPlacement));
  else
    module->removeAttr(kPlacementAttr);
}

int64_t stageOfChunk(ModuleOp module, int64_t chunk) {
  return sim::stageOf(chunkPlacement(module), int(chunk),
                      int(meshAxis(module, kPipelineAxis)));
}

void sumGradientNormOver(func::FuncOp optimizer, int16_t axis) {
  optimizer.walk([&](graph::ClipCoefficientOp clip) {
    Value total = clip.getSumSquares();
    if (auto reduce = total.getDefiningOp<shard::AllReduceOp>()) {
      SmallVector<int16_t> axes(reduce.getGridAxes());
      axes.push_back(axis);
      llvm::sort(axes);
      reduce.setGridAxes(axes);
      return;
    }
    OpBuilder b(clip);
    int16_t axes[] = {axis};
    Value reduced = shard::AllReduceOp::create(
        b, clip.getLoc(), total.getType(), kMeshName, ArrayRef<int16_t>(axes),
        total, shard::ReductionKind::Sum);
    clip.getSumSquaresMutable().assign(reduced);
  });
}

} // namespace strata
