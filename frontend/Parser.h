//===- Parser.h - the model language's grammar ------------------*- C++ -*-===//
//
//   file    := (stmt? NEWLINE)*
//   stmt    := 'model' NAME
//            | 'const' NAME '=' expr
//            | 'input' NAME ':' '[' exprs ']'
//            | 'param' NAME ':' '[' exprs ']' '=' expr
//            | 'repeat' expr '{' NEWLINE (stmt? NEWLINE)* '}'
//            | 'loss' expr
//            | NAME '=' expr
//   expr    := term (('+' | '-') term)*
//   term    := unary (('*' | '/') unary)*
//   unary   := '-' unary | primary
//   primary := NUMBER | 'true' | 'false' | NAME | NAME '(' args ')'
//            | '(' expr ')' | '[' exprs ']'
//   args    := (expr | NAME '=' expr) (',' ...)*
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_FRONTEND_PARSER_H
#define STRATA_FRONTEND_PARSER_H

#include "frontend/AST.h"

#include <functional>
#include <optional>

namespace strata::frontend {

using ErrorSink = std::function<void(SourceLoc, const std::string &)>;

/// Parses a whole model file. On the first syntax error, reports it to
/// `error` and returns nothing.
std::optional<ModelFile> parseModel(llvm::StringRef source,
                                    const ErrorSink &error);

} // namespace strata::frontend

#endif
