//===- FrontendTest.cpp - the model language's lexer and parser -----------===//
#include "frontend/Lexer.h"
#include "frontend/Parser.h"

#include <gtest/gtest.h>

using namespace strata::frontend;

namespace {

std::vector<Token> lexAll(llvm::StringRef source) {
  Lexer lexer(source);
  std::vector<Token> tokens;
  while (true) {
    tokens.push_back(lexer.next());
    if (tokens.back().kind == TokenKind::Eof)
      return tokens;
  }
}

TEST(Lexer, TokensCarryLineAndColumn) {
  auto tokens = lexAll("param ln1.weight: [hidden]\n  x = 1.5e-3");
  ASSERT_EQ(tokens.size(), 11u);
  EXPECT_EQ(tokens[0].text, "param");
  EXPECT_EQ(tokens[1].kind, TokenKind::Identifier);
  EXPECT_EQ(tokens[1].text, "ln1.weight");
  EXPECT_EQ(tokens[1].loc.col, 7);
  EXPECT_EQ(tokens[2].kind, TokenKind::Colon);
  EXPECT_EQ(tokens[6].kind, TokenKind::Newline);
  EXPECT_EQ(tokens[7].text, "x");
  EXPECT_EQ(tokens[7].loc.line, 2);
  EXPECT_EQ(tokens[7].loc.col, 3);
  EXPECT_EQ(tokens[9].kind, TokenKind::Number);
  EXPECT_EQ(tokens[9].text, "1.5e-3");
  EXPECT_EQ(tokens[10].kind, TokenKind::Eof);
}

TEST(Lexer, NewlinesInsideParenthesesDoNotEndStatements) {
  auto tokens = lexAll("f(a,\n  b)\n[1,\n2]\n");
  int newlines = 0;
  for (const Token &token : tokens)
    newlines += token.kind == TokenKind::Newline;
  EXPECT_EQ(newlines, 2);
}

TEST(Lexer, CommentsRunToEndOfLine) {
  auto tokens = lexAll("x = y # a comment (with a paren\nz");
  ASSERT_EQ(tokens.size(), 6u);
  EXPECT_EQ(tokens[3].kind, TokenKind::Newline);
  EXPECT_EQ(tokens[4].text, "z");
}

TEST(Lexer, MalformedNumberIsOneInvalidToken) {
  auto tokens = lexAll("12abc");
  EXPECT_EQ(tokens[0].kind, TokenKind::Invalid);
  EXPECT_EQ(tokens[0].text, "12abc");
}

TEST(Lexer, TrailingDotIsNotPartOfAName) {
  auto tokens = lexAll("a.b. c");
  EXPECT_EQ(tokens[0].text, "a.b");
  EXPECT_EQ(tokens[1].kind, TokenKind::Invalid);
}

std::optional<ModelFile> parseOk(llvm::StringRef source) {
  std::string error;
  auto file = parseModel(source, [&](SourceLoc loc, const std::string &m) {
    error = std::to_string(loc.line) + ":" + std::to_string(loc.col) + ": " + m;
  });
  EXPECT_TRUE(error.empty()) << error;
  return file;
}

TEST(Parser, MultiplicationBindsTighterThanAddition) {
  auto file = parseOk("const x = 1 + 2 * 3 - 4\n");
  ASSERT_TRUE(file);
  const Expr &e = *file->statements[0].value;
  // (1 + (2 * 3)) - 4
  ASSERT_EQ(e.kind, Expr::Kind::Binary);
  EXPECT_EQ(e.op, '-');
  const Expr &sum = *e.operands[0];
  EXPECT_EQ(sum.op, '+');
  EXPECT_EQ(sum.operands[1]->op, '*');
}

TEST(Parser, CallsTakePositionalThenKeywordArguments) {
  auto file = parseOk("y = layer_norm(x - z, w, b, eps=1e-5)");
  ASSERT_TRUE(file);
  const Expr &call = *file->statements[0].value;
  ASSERT_EQ(call.kind, Expr::Kind::Call);
  EXPECT_EQ(call.name, "layer_norm");
  ASSERT_EQ(call.operands.size(), 3u);
  EXPECT_EQ(call.operands[0]->kind, Expr::Kind::Binary); // x - z, not x, -z
  ASSERT_EQ(call.keywords.size(), 1u);
  EXPECT_EQ(call.keywords[0].name, "eps");
  EXPECT_DOUBLE_EQ(call.keywords[0].value->number, 1e-5);
}

TEST(Parser, RepeatHoldsItsBody) {
  auto file = parseOk("repeat layers {\n  param w: [4] = ones\n  x = x + w\n}\n"
                      "loss f(x)\n");
  ASSERT_TRUE(file);
  ASSERT_EQ(file->statements.size(), 2u);
  const Stmt &repeat = file->statements[0];
  EXPECT_EQ(repeat.kind, Stmt::Kind::Repeat);
  ASSERT_EQ(repeat.body.size(), 2u);
  EXPECT_EQ(repeat.body[0].kind, Stmt::Kind::Param);
  EXPECT_EQ(repeat.body[0].name, "w");
  EXPECT_EQ(repeat.body[1].kind, Stmt::Kind::Assign);
  EXPECT_EQ(file->statements[1].kind, Stmt::Kind::Loss);
}

TEST(Parser, ReportsOnlyTheFirstError) {
  int errors = 0;
  SourceLoc where;
  auto file = parseModel("x = (1 +\ny = )\n", [&](SourceLoc loc, auto &) {
    ++errors;
    where = loc;
  });
  EXPECT_FALSE(file);
  EXPECT_EQ(errors, 1);
  EXPECT_EQ(where.line, 2);
}

} // namespace
