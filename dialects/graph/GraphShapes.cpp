//===- GraphShapes.cpp - shape and dtype rules of graph ops ---------------===//
#include "dialects/graph/GraphShapes.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace strata::graph {

std::string describeShape(ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "[";
  llvm::interleaveComma(shape, os);
  os << "]";
  return text;
}

std::string describe(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << type;
    return text;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  os << tensor.getElementType() << describeShape(tensor.getShape());
  return text;
}

namespace {

bool isFloatTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor &&
         (tensor.getElementType().isF32() || tensor.getElementType().isBF16());
}

bool isIdTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.getElementType().isSignlessInteger(32);
}

/// Checks that `type` is a float tensor; `role` names it in the message.
FailureOr<RankedTensorType> expectFloat(ErrorFn emitError, Type type,
                                        StringRef role) {
  if (!isFloatTensor(type)) {
    emitError() << role << " must be a float tensor, got " << describe(type);
    return failure();
  }
  return cast<RankedTensorType>(type);
}

FailureOr<RankedTensorType> expectIds(ErrorFn emitError, Type type,
                                      StringRef role) {
  if (!isIdTensor(type)) {
    emitError() << role << " must be i32 token ids, got " << describe(type);
    return failure();
  }
  return cast<RankedTensorType>(type);
}

LogicalResult expectSameElementType(ErrorFn emitError, RankedTensorType a,
                                    RankedTensorType b) {
  if (a.getElementType() == b.getElementType())
    return success();
  return emitError() << "operands have different element types: " << describe(a)
                     << " and " << describe(b);
}

} // namespace

FailureOr<RankedTensorType> inferEmbeddingType(ErrorFn emitError, Type table,
                                               Type ids) {
  auto tableType = expectFloat(emitError, table, "the table");
  if (failed(tableType))
    return failure();
  if (tableType->getRank() != 2) {
    emitError() << "the table must be [vocab, hidden], got " << describe(table);
    return failure();
  }
  auto idType = expectIds(emitError, ids, "the ids");
  if (failed(idType))
    return failure();
  SmallVector<int64_t> shape(idType->getShape());
  shape.push_back(tableType->getDimSize(1));
  return RankedTensorType::get(shape, tableType->getElementType());
}

FailureOr<RankedTensorType> inferMatmulType(ErrorFn emitError, Type lhs,
                                            Type rhs, bool transposeB) {
  auto lhsType = expectFloat(emitError, lhs, "the left operand");
  auto rhsType = expectFloat(emitError, rhs, "the right operand");
  if (failed(lhsType) || failed(rhsType))
    return failure();
  if (lhsType->getRank() < 1) {
    emitError() << "the left operand must have rank >= 1, got "
                << describe(lhs);
    return failure();
  }
  if (rhsType->getRank() != 2) {
    emitError() << "the right operand must be a rank-2 weight, got "
                << describe(rhs);
    return failure();
  }
  if (failed(expectSameElementType(emitError, *lhsType, *rhsType)))
    return failure();
  int64_t lhsK = lhsType->getShape().back();
  int64_t rhsK = rhsType->getDimSize(transposeB ? 1 : 0);
  int64_t n = rhsType->getDimSize(transposeB ? 0 : 1);
  if (lhsK != rhsK) {
    emitError() << "contracting dimensions differ: " << describe(lhs) << " has "
                << lhsK << ", " << describe(rhs)
                << (transposeB ? " (transposed)" : "") << " has " << rhsK;
    return failure();
  }
  SmallVector<int64_t> shape(lhsType->getShape());
  shape.back() = n;
  return RankedTensorType::get(shape, lhsType->getElementType());
}

FailureOr<RankedTensorType> inferBroadcastType(ErrorFn emitError, Type lhs,
                                               Type rhs) {
  auto lhsType = expectFloat(emitError, lhs, "the left operand");
  auto rhsType = expectFloat(emitError, rhs, "the right operand");
  if (failed(lhsType) || failed(rhsType))
    return failure();
  if (failed(expectSameElementType(emitError, *lhsType, *rhsType)))
    return failure();
  ArrayRef<int64_t> l = lhsType->getShape(), r = rhsType->getShape();
  if (r.size() > l.size() || l.take_back(r.size()) != r) {
    emitError() << describe(rhs) << " does not broadcast to " << describe(lhs)
                << ": the right shape must equal the left or a suffix of it";
    return failure();
  }
  return *lhsType;
}

FailureOr<RankedTensorType> inferUnaryType(ErrorFn emitError, Type input) {
  return expectFloat(emitError, input, "the input");
}

FailureOr<RankedTensorType> inferNormType(ErrorFn emitError, Type input,
                                          Type weight, Type bias) {
  auto inputType = expectFloat(emitError, input, "the input");
  if (failed(inputType))
    return failure();
  if (inputType->getRank() < 1) {
    emitError() << "the input must have rank >= 1, got " << describe(input);
    return failure();
  }
  int64_t width = inputType->getShape().back();
  auto expectVector = [&](Type type, StringRef role) -> LogicalResult {
    auto t = expectFloat(emitError, type, role);
    if (failed(t))
      return failure();
    if (t->getRank() != 1 || t->getDimSize(0) != width)
      return emitError() << role << " must be [" << width
                         << "], the last dimension of " << describe(input)
                         << ", got " << describe(type);
    return expectSameElementType(emitError, *inputType, *t);
  };
  if (failed(expectVector(weight, "the weight")))
    return failure();
  if (bias && failed(expectVector(bias, "the bias")))
    return failure();
  return *inputType;
}

FailureOr<RankedTensorType> inferReshapeType(ErrorFn emitError, Type input,
                                             ArrayRef<int64_t> shape) {
  auto inputType = expectFloat(emitError, input, "the input");
  if (failed(inputType))
    return failure();
  int64_t count = inputType->getNumElements();
  SmallVector<int64_t> result(shape);
  int64_t known = 1;
  int inferred = -1;
  for (auto [i, dim] : llvm::enumerate(result)) {
    if (dim == -1) {
      if (inferred >= 0) {
        emitError() << "the shape " << describeShape(shape)
                    << " has more than one -1";
        return failure();
      }
      inferred = i;
      continue;
    }
    if (dim <= 0) {
      emitError() << "the shape " << describeShape(shape)
                  << " has a dimension that is not positive";
      return failure();
    }
    known *= dim;
  }
  if (inferred >= 0) {
    if (count % known != 0) {
      emitError() << "cannot reshape " << describe(input) << " (" << count
                  << " elements) to " << describeShape(shape) << ": " << count
                  << " is not a multiple of " << known;
      return failure();
    }
    result[inferred] = count / known;
    known = count;
  }
  if (known != count) {
    emitError() << "cannot reshape " << describe(input) << " (" << count
                << " elements) to " << describeShape(shape) << " (" << known
                << " elements)";
    return failure();
  }
  return RankedTensorType::get(result, inputType->getElementType());
}

FailureOr<RankedTensorType> inferTransposeType(ErrorFn emitError, Type input,
                                               ArrayRef<int64_t> permutation) {
  auto inputType = expectFloat(emitError, input, "the input");
  if (failed(inputType))
    return failure();
  int64_t rank = inputType->getRank();
  SmallVector<bool> seen(rank, false);
  bool valid = static_cast<int64_t>(permutation.size()) == rank;
  for (int64_t p : permutation) {
    if (!valid || p < 0 || p >= rank || seen[p]) {
      valid = false;
      break;
    }
    seen[p] = true;
  }
  if (!valid) {
    emitError() << describeShape(permutation) << " is not a permutation of "
                << "the " << rank << " dimensions of " << describe(input);
    return failure();
  }
  SmallVector<int64_t> shape;
  for (int64_t p : permutation)
    shape.push_back(inputType->getDimSize(p));
  return RankedTensorType::get(shape, inputType->getElementType());
}

FailureOr<RankedTensorType> inferRopeType(ErrorFn emitError, Type input) {
  auto inputType = expectFloat(emitError, input, "the input");
  if (failed(inputType))
    return failure();
  if (inputType->getRank() != 4) {
    emitError() << "the input must be [batch, seq, heads, head_dim], got "
                << describe(input);
    return failure();
  }
  if (inputType->getDimSize(3) % 2 != 0) {
    emitError() << "head_dim " << inputType->getDimSize(3)
                << " must be even to rotate pairs";
    return failure();
  }
  return *inputType;
}

FailureOr<RankedTensorType>
inferAttentionType(ErrorFn emitError, Type query, Type key, Type value,
                   bool causal, std::optional<int64_t> groupSize) {
  auto q = expectFloat(emitError, query, "the query");
  auto k = expectFloat(emitError, key, "the key");
  auto v = expectFloat(emitError, value, "the value");
  if (failed(q) || failed(k) || failed(v))
    return failure();
  for (auto [t, role] : {std::pair{*q, "the query"}, std::pair{*k, "the key"},
                         std::pair{*v, "the value"}}) {
    if (t.getRank() != 4) {
      emitError() << role << " must be [batch, seq, heads, head_dim], got "
                  << describe(t);
      return failure();
    }
  }
  if (*k != *v) {
    emitError() << "the key " << describe(key) << " and the value "
                << describe(value) << " must have the same shape";
    return failure();
  }
  if (failed(expectSameElementType(emitError, *q, *k)))
    return failure();
  if (q->getDimSize(0) != k->getDimSize(0)) {
    emitError() << "batch differs: the query " << describe(query)
                << ", the key " << describe(key);
    return failure();
  }
  if (q->getDimSize(3) != k->getDimSize(3)) {
    emitError() << "head_dim differs: the query " << describe(query)
                << ", the key " << describe(key);
    return failure();
  }
  int64_t heads = q->getDimSize(2), kvHeads = k->getDimSize(2);
  if (groupSize) {
    if (*groupSize < 1) {
      emitError() << "group_size must be positive, got " << *groupSize;
      return failure();
    }
  } else if (heads % kvHeads != 0) {
    emitError() << "query heads " << heads
                << " are not a multiple of key/value heads " << kvHeads;
    return failure();
  }
  if (causal && q->getDimSize(1) != k->getDimSize(1)) {
    emitError() << "causal attention needs equal query and key lengths, got "
                << q->getDimSize(1) << " and " << k->getDimSize(1);
    return failure();
  }
  return *q;
}

RankedTensorType attentionLseType(RankedTensorType query) {
  return RankedTensorType::get(
      {query.getDimSize(0), query.getDimSize(2), query.getDimSize(1)},
      Float32Type::get(query.getContext()));
}

RankedTensorType attentionSavedType(RankedTensorType query,
                                    RankedTensorType key, bool unfused) {
  if (!unfused)
    return attentionLseType(query);
  return RankedTensorType::get({query.getDimSize(0), query.getDimSize(2),
                                query.getDimSize(1), key.getDimSize(1)},
                               Float32Type::get(query.getContext()));
}

FailureOr<RankedTensorType> inferCrossEntropyType(ErrorFn emitError,
                                                  Type logits, Type labels) {
  auto logitType = expectFloat(emitError, logits, "the logits");
  auto labelType = expectIds(emitError, labels, "the labels");
  if (failed(logitType) || failed(labelType))
    return failure();
  if (logitType->getRank() < 1 ||
      logitType->getShape().drop_back() != labelType->getShape()) {
    emitError() << "the labels " << describe(labels)
                << " must have the shape of the logits " << describe(logits)
                << " without the last (vocabulary) dimension";
    return failure();
  }
  return RankedTensorType::get({}, Float32Type::get(logits.getContext()));
}

} // namespace strata::graph
