//===- Values.h - what a model-language expression evaluates to -*- C++ -*-===//
#ifndef STRATA_FRONTEND_VALUES_H
#define STRATA_FRONTEND_VALUES_H

#include "dialects/graph/GraphShapes.h"
#include "mlir/IR/Value.h"

#include <cmath>
#include <string>
#include <vector>

namespace strata::frontend {

/// A number (an integer or a real), a boolean, a list, or a tensor (an SSA
/// value of the graph being built).
struct Val {
  enum class Kind { Number, Bool, List, Tensor };
  Kind kind = Kind::Number;
  double number = 0;
  bool isInteger = false; // derived from number
  bool boolean = false;
  std::vector<Val> list;
  mlir::Value tensor;

  /// A number is an integer when its value is one, however it was computed:
  /// 16 / 3 * 3 is the dimension 16.
  static Val makeNumber(double number) {
    Val v;
    v.kind = Kind::Number;
    v.number = number;
    v.isInteger =
        std::floor(number) == number && std::fabs(number) <= 9007199254740992.0;
    return v;
  }
  static Val makeBool(bool b) {
    Val v;
    v.kind = Kind::Bool;
    v.boolean = b;
    return v;
  }
  static Val makeList() {
    Val v;
    v.kind = Kind::List;
    return v;
  }
  static Val makeTensor(mlir::Value tensor) {
    Val v;
    v.kind = Kind::Tensor;
    v.tensor = tensor;
    return v;
  }

  bool isNumber() const { return kind == Kind::Number; }
  bool isBool() const { return kind == Kind::Bool; }
  bool isList() const { return kind == Kind::List; }
  bool isTensor() const { return kind == Kind::Tensor; }

  std::string describeKind() const {
    switch (kind) {
    case Kind::Number:
      return "a number";
    case Kind::Bool:
      return "a boolean";
    case Kind::List:
      return "a list";
    case Kind::Tensor:
      return "a tensor";
    }
    return "a value";
  }

  /// "the number 12.5", "the tensor f32[2, 16, 64]".
  std::string describe() const {
    switch (kind) {
    case Kind::Number: {
      char text[64];
      if (isInteger)
        std::snprintf(text, sizeof text, "%.0f", number);
      else
        std::snprintf(text, sizeof text, "%g", number);
      return std::string("the number ") + text;
    }
    case Kind::Bool:
      return boolean ? "true" : "false";
    case Kind::List:
      return "a list of " + std::to_string(list.size());
    case Kind::Tensor:
      return "the tensor " + graph::describe(tensor.getType());
    }
    return "a value";
  }
};

} // namespace strata::frontend

#endif
