//===- Calibration.cpp - measured kernel times for the simulator ----------===//
#include "runtime/cluster/Calibration.h"
#include "runtime/base/JsonReader.h"
#include "runtime/base/WholeFile.h"

#include <cmath>

namespace strata::runtime {

namespace {

// An iteration's measured entries: a trillion calls, a million seconds
// (11 days) at most each; a file of at most 256 MiB sums far below
// overflow.
constexpr int64_t kMostCalls = 1000000000000;
constexpr double kMostSeconds = 1e6;

/// Reads a JSON object's members, calling `member` with each key (which
/// must consume its value); "" or the error.
template <typename Member>
std::string members(JsonReader &json, const std::string &what,
                    Member member) {
  if (!json.eat('{'))
    return what + " must be an object";
  if (json.eat('}'))
    return "";
  do {
    std::string key;
    if (!json.string(key) || !json.eat(':'))
      return what + " is not valid JSON (a field name and ':' expected)";
    if (std::string error = member(key); !error.empty())
      return error;
  } while (json.eat(','));
  return json.eat('}') ? "" : what + " is not valid JSON (',' or '}' expected)";
}

} // namespace

std::string Calibration::parse(std::string_view text) {
  measured.clear();
  JsonReader json(text);
  size_t count = 0;
  auto entry = [&](const std::string &where) -> std::string {
    std::string name, shape;
    int64_t calls = -1;
    double seconds = -1;
    bool named = false, shaped = false, timed = false;
    std::string error =
        members(json, where, [&](const std::string &key) -> std::string {
          if (key == "name") {
            named = json.string(name);
            return named ? "" : where + ".name must be a string";
          }
          if (key == "shape") {
            shaped = json.string(shape);
            return shaped ? "" : where + ".shape must be a string";
          }
          // Bounded, so that sums over entries stay finite and exact.
          if (key == "calls")
            return json.unsignedInteger(calls) && calls >= 1 &&
                           calls <= kMostCalls
                       ? ""
                       : where + ".calls must be a whole number from 1 to "
                                 "1e12";
          if (key == "seconds") {
            timed = json.number(seconds) && std::isfinite(seconds) &&
                    seconds >= 0 && seconds <= kMostSeconds;
            return timed ? ""
                         : where + ".seconds must be a number from 0 to 1e6";
          }
          return json.skipValue() ? "" : where + " is not valid JSON";
        });
    if (!error.empty())
      return error;
    if (!named || !shaped || calls < 1 || !timed)
      return where + " needs a name, a shape, calls and seconds";
    Sum &sum = measured[{name, shape}];
    sum.seconds += seconds;
    sum.calls += calls;
    ++count;
    return "";
  };
  auto list = [&](const std::string &where) -> std::string {
    if (!json.eat('['))
      return where + " must be a list of entries";
    if (json.eat(']'))
      return "";
    size_t i = 0;
    do {
      if (std::string error = entry(where + "[" + std::to_string(i++) + "]");
          !error.empty())
        return error;
    } while (json.eat(','));
    return json.eat(']') ? "" : where + " is not valid JSON (',' or ']' expected)";
  };
  std::string error =
      members(json, "the calibration", [&](const std::string &key) {
        if (key == "entries")
          return list("entries");
        if (key == "plans")
          return members(json, "plans", [&](const std::string &plan) {
            return list("plans." + plan);
          });
        return json.skipValue() ? std::string()
                                : "the calibration is not valid JSON";
      });
  if (!error.empty())
    return error;
  if (!json.done())
    return "the calibration has text after its object";
  if (count == 0)
    return "the calibration has no entries (neither \"entries\" nor "
           "\"plans\")";
  return "";
}

std::string Calibration::load(const std::string &path) {
  std::string text;
  if (std::string error = readFileWhole(path, text, kJsonFile); !error.empty())
    return error;
  if (std::string error = parse(text); !error.empty())
    return "calibration " + path + ": " + error;
  return "";
}

double Calibration::secondsPerCall(const std::string &name,
                                   const std::string &shape) const {
  auto it = measured.find({name, shape});
  if (it == measured.end()) {
    ++misses;
    return -1;
  }
  ++hits;
  return it->second.seconds / double(it->second.calls);
}

} // namespace strata::runtime
