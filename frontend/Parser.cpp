//===- Parser.cpp - the model language's grammar --------------------------===//
#include "frontend/Parser.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace strata::frontend {
namespace {

/// An invalid token for a message; bytes that do not print are shown as hex.
std::string describeInvalid(const std::string &text) {
  std::string shown;
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7f) {
      shown += char(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      shown += hex;
    }
  }
  return "'" + shown + "', which is not part of the language";
}

/// How deep an expression or a nest of repeat blocks may go. Everything
/// after the parser walks the tree recursively (and frees it so): without
/// a bound, thousands of parentheses or a megabyte of `1 + 1 + ...`
/// overflowed the stack. Python's parser stops nesting at 200.
constexpr int kMaxNesting = 256;

class Parser {
public:
  Parser(llvm::StringRef source, const ErrorSink &error)
      : lexer(source), error(error) {
    token = lexer.next();
  }

  std::optional<ModelFile> parseFile() {
    ModelFile file;
    if (!parseStatements(file.statements, /*inBlock=*/false))
      return std::nullopt;
    file.end = token.loc;
    return file;
  }

private:
  void consume() { token = lexer.next(); }
  bool at(TokenKind kind) const { return token.kind == kind; }
  bool atKeyword(llvm::StringRef word) const {
    return at(TokenKind::Identifier) && token.text == word;
  }

  bool fail(SourceLoc loc, const std::string &message) {
    if (!failed)
      error(loc, message);
    failed = true;
    return false;
  }

  std::string describeToken() const {
    if (at(TokenKind::Identifier) || at(TokenKind::Number))
      return "'" + token.text + "'";
    if (at(TokenKind::Invalid))
      return describeInvalid(token.text);
    return spell(token.kind);
  }

  bool expect(TokenKind kind, const char *context) {
    if (at(kind)) {
      consume();
      return true;
    }
    return fail(token.loc, std::string("expected ") + spell(kind) + " " +
                               context + ", found " + describeToken());
  }

  bool expectName(std::string &name, SourceLoc &loc, const char *context) {
    if (!at(TokenKind::Identifier))
      return fail(token.loc, std::string("expected a name ") + context +
                                 ", found " + describeToken());
    name = token.text;
    loc = token.loc;
    consume();
    return true;
  }

  bool endOfStatement() {
    if (at(TokenKind::Newline)) {
      consume();
      return true;
    }
    if (at(TokenKind::Eof) || at(TokenKind::RBrace))
      return true;
    return fail(token.loc,
                "expected the end of the statement, found " + describeToken());
  }

  bool parseStatements(std::vector<Stmt> &out, bool inBlock) {
    while (true) {
      while (at(TokenKind::Newline))
        consume();
      if (at(TokenKind::Eof)) {
        if (inBlock)
          return fail(token.loc, "expected '}' to close the repeat block");
        return true;
      }
      if (at(TokenKind::RBrace)) {
        if (!inBlock)
          return fail(token.loc, "'}' without an open repeat block");
        return true;
      }
      Stmt stmt;
      if (!parseStatement(stmt) || !endOfStatement())
        return false;
      out.push_back(std::move(stmt));
    }
  }

  bool parseDims(std::vector<ExprPtr> &dims, const char *what) {
    if (!expect(TokenKind::LBracket,
                (std::string("to open the shape of ") + what).c_str()))
      return false;
    return parseExprList(dims, TokenKind::RBracket);
  }

  bool parseStatement(Stmt &stmt) {
    stmt.loc = token.loc;
    if (atKeyword("model")) {
      consume();
      stmt.kind = Stmt::Kind::Model;
      return expectName(stmt.name, stmt.nameLoc, "after 'model'");
    }
    if (atKeyword("const")) {
      consume();
      stmt.kind = Stmt::Kind::Const;
      return expectName(stmt.name, stmt.nameLoc, "after 'const'") &&
             expect(TokenKind::Equal, "after the constant's name") &&
             parseExpr(stmt.value);
    }
    if (atKeyword("input") || atKeyword("param")) {
      bool isParam = token.text == "param";
      consume();
      stmt.kind = isParam ? Stmt::Kind::Param : Stmt::Kind::Input;
      const char *what = isParam ? "parameter" : "input";
      if (!expectName(stmt.name, stmt.nameLoc,
                      isParam ? "after 'param'" : "after 'input'") ||
          !expect(TokenKind::Colon, "before the shape") ||
          !parseDims(stmt.dims, what))
        return false;
      if (!isParam)
        return true;
      if (!at(TokenKind::Equal))
        return fail(token.loc, "expected '=' and an initializer (normal(std), "
                               "zeros or ones) after the parameter's shape");
      consume();
      return parseExpr(stmt.value);
    }
    if (atKeyword("repeat")) {
      Nesting level(blocks);
      if (blocks > kMaxNesting)
        return fail(token.loc, "repeat blocks nest more than " +
                                   std::to_string(kMaxNesting) + " deep");
      consume();
      stmt.kind = Stmt::Kind::Repeat;
      if (!parseExpr(stmt.value) ||
          !expect(TokenKind::LBrace, "to open the repeated block"))
        return false;
      if (!at(TokenKind::Newline))
        return fail(token.loc, "the repeated block starts on a new line after "
                               "'{'");
      if (!parseStatements(stmt.body, /*inBlock=*/true))
        return false;
      return expect(TokenKind::RBrace, "to close the repeated block");
    }
    if (atKeyword("loss")) {
      consume();
      stmt.kind = Stmt::Kind::Loss;
      return parseExpr(stmt.value);
    }
    if (at(TokenKind::Identifier)) {
      stmt.kind = Stmt::Kind::Assign;
      stmt.name = token.text;
      stmt.nameLoc = token.loc;
      consume();
      if (!at(TokenKind::Equal))
        return fail(token.loc,
                    "expected '=' after '" + stmt.name +
                        "': a statement is model, const, input, param, "
                        "repeat, loss or an assignment");
      consume();
      return parseExpr(stmt.value);
    }
    return fail(token.loc, "expected a statement (model, const, input, param, "
                           "repeat, loss or NAME = ...), found " +
                               describeToken());
  }

  ExprPtr makeExpr(Expr::Kind kind, SourceLoc loc) {
    auto expr = std::make_unique<Expr>();
    expr->kind = kind;
    expr->loc = loc;
    return expr;
  }

  bool tooDeep(SourceLoc loc) {
    return fail(loc, "the expression nests more than " +
                         std::to_string(kMaxNesting) +
                         " levels deep (parentheses, brackets, calls, unary "
                         "minus and chains of operators each count): give "
                         "parts of it names");
  }

  /// The node's height from its operands'; false past the bound.
  bool measure(Expr &expr) {
    int below = 0;
    for (const ExprPtr &operand : expr.operands)
      below = std::max(below, operand->height);
    for (const KeywordArg &keyword : expr.keywords)
      below = std::max(below, keyword.value->height);
    expr.height = below + 1;
    return expr.height <= kMaxNesting || tooDeep(expr.loc);
  }

  /// Counts one level of the parser's own recursion while alive.
  struct Nesting {
    explicit Nesting(int &depth) : depth(depth) { ++depth; }
    ~Nesting() { --depth; }
    int &depth;
  };

  bool parseExpr(ExprPtr &out) {
    if (!parseTerm(out))
      return false;
    while (at(TokenKind::Plus) || at(TokenKind::Minus)) {
      auto binary = makeExpr(Expr::Kind::Binary, token.loc);
      binary->op = token.text[0];
      consume();
      ExprPtr rhs;
      if (!parseTerm(rhs))
        return false;
      binary->operands.push_back(std::move(out));
      binary->operands.push_back(std::move(rhs));
      out = std::move(binary);
      if (!measure(*out))
        return false;
    }
    return true;
  }

  bool parseTerm(ExprPtr &out) {
    if (!parseUnary(out))
      return false;
    while (at(TokenKind::Star) || at(TokenKind::Slash)) {
      auto binary = makeExpr(Expr::Kind::Binary, token.loc);
      binary->op = token.text[0];
      consume();
      ExprPtr rhs;
      if (!parseUnary(rhs))
        return false;
      binary->operands.push_back(std::move(out));
      binary->operands.push_back(std::move(rhs));
      out = std::move(binary);
      if (!measure(*out))
        return false;
    }
    return true;
  }

  bool parseUnary(ExprPtr &out) {
    // Every nesting (a parenthesis, a list, a call's argument, a unary
    // minus) passes here: the bound holds before the tree is built.
    Nesting level(nesting);
    if (nesting > kMaxNesting)
      return tooDeep(token.loc);
    if (!pending && at(TokenKind::Minus)) {
      out = makeExpr(Expr::Kind::Negate, token.loc);
      consume();
      ExprPtr operand;
      if (!parseUnary(operand))
        return false;
      out->operands.push_back(std::move(operand));
      return measure(*out);
    }
    if (!parsePrimary(out))
      return false;
    return measure(*out);
  }

  bool parseExprList(std::vector<ExprPtr> &items, TokenKind close) {
    if (at(close)) {
      consume();
      return true;
    }
    while (true) {
      ExprPtr item;
      if (!parseExpr(item))
        return false;
      items.push_back(std::move(item));
      if (at(TokenKind::Comma)) {
        consume();
        continue;
      }
      return expect(close, "to close the list");
    }
  }

  bool parseCallArgs(Expr &call) {
    SourceLoc open = token.loc;
    consume(); // '('
    if (at(TokenKind::RParen)) {
      consume();
      return true;
    }
    while (true) {
      // NAME '=' starts a keyword argument; anything else is positional.
      if (at(TokenKind::Identifier)) {
        Token name = token;
        consume();
        if (at(TokenKind::Equal)) {
          consume();
          KeywordArg keyword{name.text, name.loc, nullptr};
          if (!parseExpr(keyword.value))
            return false;
          call.keywords.push_back(std::move(keyword));
        } else {
          ExprPtr arg;
          if (!continueExprFromName(name, arg))
            return false;
          if (!call.keywords.empty())
            return fail(arg->loc, "a positional argument follows a keyword "
                                  "argument");
          call.operands.push_back(std::move(arg));
        }
      } else {
        ExprPtr arg;
        if (!parseExpr(arg))
          return false;
        if (!call.keywords.empty())
          return fail(arg->loc,
                      "a positional argument follows a keyword argument");
        call.operands.push_back(std::move(arg));
      }
      if (at(TokenKind::Comma)) {
        consume();
        continue;
      }
      if (at(TokenKind::RParen)) {
        consume();
        return true;
      }
      return fail(token.loc,
                  "expected ',' or ')' in the arguments of '" + call.name +
                      "' (opened at " + std::to_string(open.line) + ":" +
                      std::to_string(open.col) + "), found " + describeToken());
    }
  }

  /// Parses the rest of an expression whose first token, a name, was taken.
  bool continueExprFromName(const Token &name, ExprPtr &out) {
    pending = name;
    return parseExpr(out);
  }

  bool parsePrimary(ExprPtr &out) {
    Token current = token;
    if (pending) {
      current = *pending;
      pending.reset();
    } else {
      consume();
    }
    switch (current.kind) {
    case TokenKind::Number: {
      out = makeExpr(Expr::Kind::Number, current.loc);
      out->number = std::strtod(current.text.c_str(), nullptr);
      return true;
    }
    case TokenKind::Identifier: {
      if (current.text == "true" || current.text == "false") {
        out = makeExpr(Expr::Kind::Bool, current.loc);
        out->boolean = current.text == "true";
        return true;
      }
      if (at(TokenKind::LParen)) {
        out = makeExpr(Expr::Kind::Call, current.loc);
        out->name = current.text;
        return parseCallArgs(*out);
      }
      out = makeExpr(Expr::Kind::Name, current.loc);
      out->name = current.text;
      return true;
    }
    case TokenKind::LParen:
      if (!parseExpr(out))
        return false;
      return expect(TokenKind::RParen, "to close the parenthesis");
    case TokenKind::LBracket:
      out = makeExpr(Expr::Kind::List, current.loc);
      return parseExprList(out->operands, TokenKind::RBracket);
    default: {
      std::string found = current.kind == TokenKind::Invalid
                              ? describeInvalid(current.text)
                              : spell(current.kind);
      return fail(current.loc, "expected an expression, found " + found);
    }
    }
  }

  Lexer lexer;
  const ErrorSink &error;
  Token token;
  std::optional<Token> pending;
  bool failed = false;
  int nesting = 0, blocks = 0;
};

} // namespace

std::optional<ModelFile> parseModel(llvm::StringRef source,
                                    const ErrorSink &error) {
  Parser parser(source, error);
  return parser.parseFile();
}

} // namespace strata::frontend
