//===- Lexer.cpp - tokens of the model language ---------------------------===//
#include "frontend/Lexer.h"

#include <cctype>

namespace strata::frontend {

const char *spell(TokenKind kind) {
  switch (kind) {
  case TokenKind::Eof:
    return "end of file";
  case TokenKind::Newline:
    return "end of line";
  case TokenKind::Identifier:
    return "a name";
  case TokenKind::Number:
    return "a number";
  case TokenKind::LParen:
    return "'('";
  case TokenKind::RParen:
    return "')'";
  case TokenKind::LBracket:
    return "'['";
  case TokenKind::RBracket:
    return "']'";
  case TokenKind::LBrace:
    return "'{'";
  case TokenKind::RBrace:
    return "'}'";
  case TokenKind::Comma:
    return "','";
  case TokenKind::Colon:
    return "':'";
  case TokenKind::Equal:
    return "'='";
  case TokenKind::Plus:
    return "'+'";
  case TokenKind::Minus:
    return "'-'";
  case TokenKind::Star:
    return "'*'";
  case TokenKind::Slash:
    return "'/'";
  case TokenKind::Invalid:
    return "an invalid character";
  }
  return "a token";
}

char Lexer::advance() {
  char c = source[pos++];
  if (c == '\n') {
    ++here.line;
    here.col = 1;
  } else {
    ++here.col;
  }
  return c;
}

Token Lexer::make(TokenKind kind, std::string text, SourceLoc loc) const {
  Token token;
  token.kind = kind;
  token.text = std::move(text);
  token.loc = loc;
  return token;
}

static bool isIdentStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
static bool isIdentBody(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}
static bool isDigit(char c) {
  return std::isdigit(static_cast<unsigned char>(c));
}

Token Lexer::next() {
  while (true) {
    char c = peek();
    if (c == ' ' || c == '\t' || c == '\r') {
      advance();
    } else if (c == '#') {
      while (peek() != '\n' && peek() != '\0')
        advance();
    } else if (c == '\n' && nesting > 0) {
      advance();
    } else {
      break;
    }
  }
  SourceLoc loc = here;
  if (pos >= source.size())
    return make(TokenKind::Eof, "", loc);
  char c = peek();
  if (isDigit(c) || (c == '.' && isDigit(peek(1))))
    return lexNumber(loc);
  if (isIdentStart(c))
    return lexIdentifier(loc);
  advance();
  switch (c) {
  case '\n':
    return make(TokenKind::Newline, "\n", loc);
  case '(':
    ++nesting;
    return make(TokenKind::LParen, "(", loc);
  case ')':
    nesting = nesting > 0 ? nesting - 1 : 0;
    return make(TokenKind::RParen, ")", loc);
  case '[':
    ++nesting;
    return make(TokenKind::LBracket, "[", loc);
  case ']':
    nesting = nesting > 0 ? nesting - 1 : 0;
    return make(TokenKind::RBracket, "]", loc);
  case '{':
    return make(TokenKind::LBrace, "{", loc);
  case '}':
    return make(TokenKind::RBrace, "}", loc);
  case ',':
    return make(TokenKind::Comma, ",", loc);
  case ':':
    return make(TokenKind::Colon, ":", loc);
  case '=':
    return make(TokenKind::Equal, "=", loc);
  case '+':
    return make(TokenKind::Plus, "+", loc);
  case '-':
    return make(TokenKind::Minus, "-", loc);
  case '*':
    return make(TokenKind::Star, "*", loc);
  case '/':
    return make(TokenKind::Slash, "/", loc);
  default:
    return make(TokenKind::Invalid, std::string(1, c), loc);
  }
}

Token Lexer::lexNumber(SourceLoc loc) {
  size_t start = pos;
  while (isDigit(peek()))
    advance();
  if (peek() == '.' && isDigit(peek(1))) {
    advance();
    while (isDigit(peek()))
      advance();
  }
  if ((peek() == 'e' || peek() == 'E') &&
      (isDigit(peek(1)) ||
       ((peek(1) == '-' || peek(1) == '+') && isDigit(peek(2))))) {
    advance();
    if (peek() == '-' || peek() == '+')
      advance();
    while (isDigit(peek()))
      advance();
  }
  Token token = make(TokenKind::Number, source.slice(start, pos).str(), loc);
  // "12abc" is one mistake, not a number followed by a name.
  if (isIdentStart(peek())) {
    while (isIdentBody(peek()))
      advance();
    token.kind = TokenKind::Invalid;
    token.text = source.slice(start, pos).str();
  }
  return token;
}

Token Lexer::lexIdentifier(SourceLoc loc) {
  size_t start = pos;
  while (true) {
    while (isIdentBody(peek()))
      advance();
    if (peek() == '.' && isIdentStart(peek(1))) {
      advance();
      continue;
    }
    break;
  }
  return make(TokenKind::Identifier, source.slice(start, pos).str(), loc);
}

} // namespace strata::frontend
