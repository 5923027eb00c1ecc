//===- Sharding.h - tensor parallelism's shardings, for the rules -*- C++
//-*-===//
//
// What an op's sharding rule (graph::Shardable, compiler/rules/) works
// with. Every tensor of the step is, across the tp ranks:
//
//   replicated   every rank holds all of it
//   split(d)     rank r holds the r-th of tp equal blocks of dimension d
//   partial      every rank holds a summand; the tensor is their sum
//
// A rule reads its operands' shardings, decides those of parameters met for
// the first time, converts an operand whose sharding does not fit (a
// collective or a local slice inserted before the op), and sets its
// results'. The pass (compiler/passes/TensorParallel.cpp) plans which
// weights split their columns, walks the ops in order and localizes types.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_COMPILER_RULES_SHARDING_H
#define STRATA_COMPILER_RULES_SHARDING_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <optional>
#include <string>

namespace strata {

struct Sharding {
  enum class Kind : uint8_t { Replicated, Split, Partial };
  Kind kind = Kind::Replicated;
  int64_t dim = -1;

  static Sharding replicated() { return {}; }
  static Sharding split(int64_t d) { return {Kind::Split, d}; }
  static Sharding partial() { return {Kind::Partial, -1}; }
  bool isReplicated() const { return kind == Kind::Replicated; }
  bool isSplit() const { return kind == Kind::Split; }
  bool isPartial() const { return kind == Kind::Partial; }
  bool isSplit(int64_t d) const { return isSplit() && dim == d; }
  bool operator==(const Sharding &o) const {
    return kind == o.kind && dim == o.dim;
  }
  bool operator!=(const Sharding &o) const { return !(*this == o); }
};

/// The dimension of `out` that holds the same row-major blocks as
/// dimension `dim` of `in` (a reshape from one to the other keeps a split
/// of it), or none.
std::optional<int64_t> dimThroughReshape(mlir::RankedTensorType in, int64_t dim,
                                         mlir::RankedTensorType out);

class ShardingState {
public:
  ShardingState(mlir::ModuleOp module, int64_t tp, bool sequenceParallel)
      : module(module), tp(tp), sp(sequenceParallel), b(module.getContext()) {}

  mlir::OpBuilder &builder() { return b; }

  /// A value's sharding: a parameter's as decided (replicated until then).
  Sharding get(mlir::Value v);
  void set(mlir::Value v, Sharding s) { shardings[v] = s; }
  /// Whether `v` is a parameter whose sharding is not decided yet.
  bool isUndecidedParam(mlir::Value v);
  void decide(mlir::Value param, Sharding s);
  /// A parameter's decided sharding, by name (replicated if none).
  Sharding paramSharding(llvm::StringRef name) { return params.lookup(name); }

  /// Where a partial or replicated activation goes when it must become
  /// whole: the replicated stream, or its sequence split with sequence
  /// parallelism.
  Sharding streamSharding(mlir::Value v);

  /// Replaces operand `index` of `user` by a `to`-sharded copy of it.
  mlir::LogicalResult convertOperand(mlir::Operation *user, unsigned index,
                                     Sharding to);
  mlir::FailureOr<mlir::Value> convert(mlir::Value v, Sharding to,
                                       mlir::Operation *before);

  /// The output dimension that carries a split of input dimension `dim`
  /// through a reshape, or none (with `why`).
  std::optional<int64_t> mapThroughReshape(mlir::RankedTensorType in,
                                           int64_t dim,
                                           mlir::RankedTensorType out,
                                           std::string &why);

  /// `v` summed (or with `max`, maxed) over the tp ranks, placed before
  /// the builder's insertion point as `type`: replicated.
  mlir::Value allReduce(mlir::Location loc, mlir::Type type, mlir::Value v,
                        bool max);

  /// Places `created` (a collective or statistic made for `consumer`) in
  /// the layer `consumer` belongs to, so that it runs on the same pipeline
  /// stage.
  static void placeInLayerOf(mlir::Operation *created,
                             mlir::Operation *consumer);

  /// An error at `op`, prefixed with the tensor-parallel size.
  mlir::InFlightDiagnostic error(mlir::Operation *op);

  // Replicated parameters whose accumulators gather partial sums (a norm
  // weight under sequence parallelism): reduced once, in @optimizer.
  llvm::StringSet<> partialGrads;
  // The vocabulary-parallel loss's all-reduced row statistics, by logits,
  // for its gradient.
  struct LossStats {
    mlir::Value max, sumExp;
  };
  llvm::DenseMap<mlir::Value, LossStats> lossStats;

protected:
  mlir::ModuleOp module;
  int64_t tp;
  bool sp;
  mlir::OpBuilder b;
  llvm::DenseMap<mlir::Value, Sharding> shardings;
  llvm::StringMap<Sharding> params;
  llvm::DenseMap<mlir::Value,
                 llvm::SmallVector<std::pair<Sharding, mlir::Value>, 2>>
      converted;
};

/// Planning (tensor parallelism's first step) follows a matmul's output,
/// split along its last dimension, forward through the ops of the forward
/// pass (each op's graph::Shardable::planSplit) to learn whether a
/// consumer needs it split (another matmul, the loss, attention's queries)
/// and whether every op on the way can carry the split.
class SplitPlanner {
public:
  enum class Need { None, Optional, Required };

  /// `forwardEnd`: the loss seed, after which the backward pass begins
  /// (null: follow everything).
  SplitPlanner(ShardingState &state, mlir::Operation *forwardEnd)
      : state(state), forwardEnd(forwardEnd) {}

  /// Follows `value`, split along `dim` (-1: a split that could not be
  /// carried, followed only to learn whether it was needed).
  void follow(mlir::Value value, int64_t dim);
  /// `op` cannot carry the split, because `why` (the first reason stays).
  void block(mlir::Operation *op, std::string why);
  /// A consumer that needs its first operand split along its last
  /// dimension (a matmul's input, the loss's logits) has met `use`'s split
  /// along `dim`.
  void wantLastDimension(mlir::OpOperand &use, int64_t dim);
  /// A consumer's need of the split (the strongest met stays).
  void want(Need need) {
    if (need > needed)
      needed = need;
  }

  ShardingState &state;
  Need needed = Need::None;
  mlir::Operation *blocked = nullptr; // the first op that cannot carry it
  std::string why;

private:
  mlir::Operation *forwardEnd;
  int depth = 0;
};

} // namespace strata

#endif
