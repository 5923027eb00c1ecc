//===- AST.h - the syntax tree of a model file ------------------*- C++ -*-===//
#ifndef STRATA_FRONTEND_AST_H
#define STRATA_FRONTEND_AST_H

#include "frontend/Lexer.h"

#include <memory>
#include <string>
#include <vector>

namespace strata::frontend {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct KeywordArg {
  std::string name;
  SourceLoc loc;
  ExprPtr value;
};

struct Expr {
  enum class Kind { Number, Bool, Name, List, Binary, Negate, Call };
  Kind kind;
  SourceLoc loc;
  double number = 0;                // Number
  bool boolean = false;             // Bool
  std::string name;                 // Name; Call: the callee
  char op = 0;                      // Binary: + - * /
  std::vector<ExprPtr> operands;    // Binary: lhs, rhs; Negate; List; Call args
  std::vector<KeywordArg> keywords; // Call
  // Levels of the tree at and below this node (the parser bounds it).
  int height = 1;
};

struct Stmt {
  enum class Kind { Model, Const, Input, Param, Assign, Repeat, Loss };
  Kind kind;
  SourceLoc loc;
  std::string name; // Model, Const, Input, Param, Assign
  SourceLoc nameLoc;
  ExprPtr value; // Const, Assign, Loss; Param: its initializer; Repeat: count
  std::vector<ExprPtr> dims; // Input, Param
  std::vector<Stmt> body;    // Repeat
};

struct ModelFile {
  std::vector<Stmt> statements;
  SourceLoc end; // where end of file is, for "no loss" and the like
};

} // namespace strata::frontend

#endif
