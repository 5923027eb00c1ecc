//===- Lexer.h - tokens of the model language -------------------*- C++ -*-===//
#ifndef STRATA_FRONTEND_LEXER_H
#define STRATA_FRONTEND_LEXER_H

#include "llvm/ADT/StringRef.h"
#include <string>

namespace strata::frontend {

/// A 1-based line and column in the model file.
struct SourceLoc {
  int line = 1;
  int col = 1;
};

enum class TokenKind {
  Eof,
  Newline,
  Identifier, // letters, digits, '_', and '.' between parts: ln1.weight
  Number,
  LParen,
  RParen,
  LBracket,
  RBracket,
  LBrace,
  RBrace,
  Comma,
  Colon,
  Equal,
  Plus,
  Minus,
  Star,
  Slash,
  Invalid,
};

struct Token {
  TokenKind kind = TokenKind::Eof;
  std::string text;
  SourceLoc loc;
};

/// Turns model source into tokens. Newlines end statements, except inside
/// parentheses and brackets, where a long call may wrap; '#' starts a comment.
class Lexer {
public:
  explicit Lexer(llvm::StringRef source) : source(source) {}
  Token next();

private:
  char peek(size_t ahead = 0) const {
    return pos + ahead < source.size() ? source[pos + ahead] : '\0';
  }
  char advance();
  Token make(TokenKind kind, std::string text, SourceLoc loc) const;
  Token lexNumber(SourceLoc loc);
  Token lexIdentifier(SourceLoc loc);

  llvm::StringRef source;
  size_t pos = 0;
  SourceLoc here;
  int nesting = 0; // open ( and [
};

const char *spell(TokenKind kind);

} // namespace strata::frontend

#endif
