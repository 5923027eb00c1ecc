//===- JsonLine.cpp - a string field of one JSON object -------------------===//
#include "runtime/data/JsonLine.h"

#include <cstdint>

namespace strata::runtime {

namespace {

class Reader {
public:
  explicit Reader(std::string_view text) : text(text) {}

  void space() {
    while (at < text.size() && (text[at] == ' ' || text[at] == '\t' ||
                                text[at] == '\r' || text[at] == '\n'))
      ++at;
  }
  bool eat(char c) {
    space();
    if (at < text.size() && text[at] == c) {
      ++at;
      return true;
    }
    return false;
  }
  bool done() {
    space();
    return at == text.size();
  }

  /// A string at `at` (after its opening quote's position), as UTF-8.
  bool string(std::string &out) {
    if (!eat('"'))
      return false;
    out.clear();
    while (at < text.size()) {
      char c = text[at++];
      if (c == '"')
        return true;
      if (static_cast<unsigned char>(c) < 0x20)
        return false; // control characters must be escaped
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at >= text.size())
        return false;
      char e = text[at++];
      switch (e) {
      case '"':
      case '\\':
      case '/':
        out += e;
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        uint32_t code;
        if (!hex4(code))
          return false;
        if (code >= 0xD800 && code < 0xDC00) { // a surrogate pair
          uint32_t low;
          if (at + 2 > text.size() || text[at] != '\\' || text[at + 1] != 'u')
            return false;
          at += 2;
          if (!hex4(low) || low < 0xDC00 || low >= 0xE000)
            return false;
          code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
        } else if (code >= 0xDC00 && code < 0xE000) {
          return false; // a lone low surrogate
        }
        utf8(code, out);
        break;
      }
      default:
        return false;
      }
    }
    return false;
  }

  /// Any value, skipped.
  bool value(int depth = 0) {
    if (depth > 512)
      return false;
    space();
    if (at >= text.size())
      return false;
    std::string ignored;
    switch (text[at]) {
    case '"':
      return string(ignored);
    case '{': {
      ++at;
      if (eat('}'))
        return true;
      do {
        if (!string(ignored) || !eat(':') || !value(depth + 1))
          return false;
      } while (eat(','));
      return eat('}');
    }
    case '[': {
      ++at;
      if (eat(']'))
        return true;
      do {
        if (!value(depth + 1))
          return false;
      } while (eat(','));
      return eat(']');
    }
    default:
      return scalar();
    }
  }

private:
  bool hex4(uint32_t &code) {
    if (at + 4 > text.size())
      return false;
    code = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text[at++];
      code <<= 4;
      if (c >= '0' && c <= '9')
        code |= uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f')
        code |= uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        code |= uint32_t(c - 'A' + 10);
      else
        return false;
    }
    return true;
  }

  static void utf8(uint32_t code, std::string &out) {
    if (code < 0x80) {
      out += char(code);
    } else if (code < 0x800) {
      out += char(0xC0 | (code >> 6));
      out += char(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += char(0xE0 | (code >> 12));
      out += char(0x80 | ((code >> 6) & 0x3F));
      out += char(0x80 | (code & 0x3F));
    } else {
      out += char(0xF0 | (code >> 18));
      out += char(0x80 | ((code >> 12) & 0x3F));
      out += char(0x80 | ((code >> 6) & 0x3F));
      out += char(0x80 | (code & 0x3F));
    }
  }

  /// A number or true, false, null.
  bool scalar() {
    for (std::string_view word : {"true", "false", "null"})
      if (text.substr(at, word.size()) == word) {
        at += word.size();
        return true;
      }
    size_t start = at;
    if (at < text.size() && text[at] == '-')
      ++at;
    size_t digits = at;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9')
      ++at;
    if (at == digits)
      return false;
    if (at < text.size() && text[at] == '.') {
      size_t fraction = ++at;
      while (at < text.size() && text[at] >= '0' && text[at] <= '9')
        ++at;
      if (at == fraction)
        return false;
    }
    if (at < text.size() && (text[at] == 'e' || text[at] == 'E')) {
      ++at;
      if (at < text.size() && (text[at] == '+' || text[at] == '-'))
        ++at;
      size_t exponent = at;
      while (at < text.size() && text[at] >= '0' && text[at] <= '9')
        ++at;
      if (at == exponent)
        return false;
    }
    return at > start;
  }

  std::string_view text;
  size_t at = 0;
};

} // namespace

std::string jsonStringField(std::string_view line, std::string_view key,
                            std::string &out) {
  Reader r(line);
  if (!r.eat('{'))
    return "not a JSON object";
  bool found = false, isString = false;
  if (!r.eat('}')) {
    std::string name;
    do {
      if (!r.string(name) || !r.eat(':'))
        return "not valid JSON";
      if (name == key && !found) {
        found = true;
        std::string value;
        r.space();
        Reader probe = r;
        if (probe.string(value)) {
          isString = true;
          out = std::move(value);
          r = probe;
          continue;
        }
      }
      if (!r.value())
        return "not valid JSON";
    } while (r.eat(','));
    if (!r.eat('}'))
      return "not valid JSON";
  }
  if (!r.done())
    return "not valid JSON (text after the object)";
  if (!found)
    return "no key \"" + std::string(key) + "\"";
  if (!isString)
    return "the value of \"" + std::string(key) + "\" is not a string";
  return "";
}

} // namespace strata::runtime
