//===- JsonReader.cpp - the JSON strata reads and writes ------------------===//
#include "runtime/base/JsonReader.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>

namespace strata::runtime {

namespace {

/// `code` appended to `out` as UTF-8.
void appendUtf8(uint32_t code, std::string &out) {
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

bool isDigit(char c) { return c >= '0' && c <= '9'; }

} // namespace

void JsonReader::space() {
  while (at < text.size() && (text[at] == ' ' || text[at] == '\t' ||
                              text[at] == '\r' || text[at] == '\n'))
    ++at;
}

bool JsonReader::eat(char c) {
  space();
  if (at < text.size() && text[at] == c) {
    ++at;
    return true;
  }
  return false;
}

bool JsonReader::boolean(bool &out) {
  space();
  for (bool value : {true, false}) {
    std::string_view word = value ? "true" : "false";
    if (text.substr(at, word.size()) == word) {
      at += word.size();
      out = value;
      return true;
    }
  }
  return false;
}

bool JsonReader::done() {
  space();
  return at == text.size();
}

bool JsonReader::hex4(uint32_t &code) {
  if (at + 4 > text.size())
    return false;
  code = 0;
  for (int i = 0; i < 4; ++i) {
    char c = text[at++];
    code <<= 4;
    if (isDigit(c))
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

bool JsonReader::string(std::string &out) {
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
      appendUtf8(code, out);
      break;
    }
    default:
      return false;
    }
  }
  return false;
}

bool JsonReader::unsignedInteger(int64_t &out) {
  space();
  size_t start = at;
  while (at < text.size() && isDigit(text[at]))
    ++at;
  if (at == start || at - start > 19)
    return false;
  out = 0;
  for (size_t i = start; i < at; ++i) {
    int digit = text[i] - '0';
    if (out > (INT64_MAX - digit) / 10)
      return false; // past int64
    out = out * 10 + digit;
  }
  return true;
}

bool JsonReader::number(double &out) {
  space();
  size_t start = at;
  if (!numberToken())
    return false;
  auto [end, error] = std::from_chars(text.data() + start, text.data() + at,
                                      out, std::chars_format::general);
  return error == std::errc() && end == text.data() + at && std::isfinite(out);
}

bool JsonReader::scalar() {
  for (std::string_view word : {"true", "false", "null"})
    if (text.substr(at, word.size()) == word) {
      at += word.size();
      return true;
    }
  return numberToken();
}

bool JsonReader::numberToken() {
  // -?digits(.digits)?([eE][+-]?digits)?
  auto digits = [&] {
    size_t start = at;
    while (at < text.size() && isDigit(text[at]))
      ++at;
    return at > start;
  };
  if (at < text.size() && text[at] == '-')
    ++at;
  if (!digits())
    return false;
  if (at < text.size() && text[at] == '.') {
    ++at;
    if (!digits())
      return false;
  }
  if (at < text.size() && (text[at] == 'e' || text[at] == 'E')) {
    ++at;
    if (at < text.size() && (text[at] == '+' || text[at] == '-'))
      ++at;
    if (!digits())
      return false;
  }
  return true;
}

bool JsonReader::skipValue() { return skipValue(0); }

bool JsonReader::stringObject(std::map<std::string, std::string> &out) {
  if (!eat('{'))
    return false;
  if (eat('}'))
    return true;
  do {
    std::string key, value;
    if (!string(key) || !eat(':') || !string(value))
      return false;
    out[key] = value;
  } while (eat(','));
  return eat('}');
}

bool JsonReader::skipValue(int depth) {
  if (depth > 512)
    return false;
  space();
  if (at >= text.size())
    return false;
  std::string ignored;
  switch (text[at]) {
  case '"':
    return string(ignored);
  case '{':
    ++at;
    if (eat('}'))
      return true;
    do {
      if (!string(ignored) || !eat(':') || !skipValue(depth + 1))
        return false;
    } while (eat(','));
    return eat('}');
  case '[':
    ++at;
    if (eat(']'))
      return true;
    do {
      if (!skipValue(depth + 1))
        return false;
    } while (eat(','));
    return eat(']');
  default:
    return scalar();
  }
}

std::string jsonStringField(std::string_view line, std::string_view key,
                            std::string &out, bool *found) {
  JsonReader r(line);
  if (!r.eat('{'))
    return "not a JSON object";
  bool seen = false, isString = false;
  if (!r.eat('}')) {
    std::string name;
    do {
      if (!r.string(name) || !r.eat(':'))
        return "not valid JSON";
      if (name == key && !seen) {
        seen = true;
        JsonReader probe = r;
        if (probe.string(out)) {
          isString = true;
          r = probe;
          continue;
        }
      }
      if (!r.skipValue())
        return "not valid JSON";
    } while (r.eat(','));
    if (!r.eat('}'))
      return "not valid JSON";
  }
  if (!r.done())
    return "not valid JSON (text after the object)";
  if (found)
    *found = seen;
  if (!seen)
    return found ? "" : "no key \"" + std::string(key) + "\"";
  if (!isString)
    return "the value of \"" + std::string(key) + "\" is not a string";
  return "";
}

std::string jsonString(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", c);
      out += escape;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string
jsonObject(const std::vector<std::pair<std::string, std::string>> &members) {
  std::string out = "{";
  for (size_t i = 0; i < members.size(); ++i)
    out += (i ? ",\n  " : "\n  ") + jsonString(members[i].first) + ": " +
           members[i].second;
  return out + "\n}\n";
}

} // namespace strata::runtime
