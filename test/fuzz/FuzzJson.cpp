//===- FuzzJson.cpp - the JSON reader
//----------------------------------------===//
//
// Every JSON strata reads goes through JsonReader (safetensors headers,
// checkpoint metadata, JSON Lines documents, configs): any bytes are read
// as a value, an object of strings, a field of a document, a number, a
// cluster spec and a calibration, and must be
// refused or read without a crash, a hang or a read past the input.
//
//===----------------------------------------------------------------------===//
#include "runtime/base/JsonReader.h"
#include "runtime/cluster/Calibration.h"
#include "runtime/cluster/ClusterSpec.h"

#include <cmath>

#include <cstdint>
#include <map>
#include <string>

using namespace strata::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  {
    JsonReader reader(text);
    if (reader.skipValue())
      (void)reader.done();
  }
  {
    JsonReader reader(text);
    std::map<std::string, std::string> strings;
    if (reader.stringObject(strings))
      (void)reader.done();
  }
  {
    // An object walked member by member, as the checkpoint metadata is.
    JsonReader reader(text);
    if (reader.eat('{') && !reader.eat('}')) {
      do {
        std::string key, value;
        int64_t number;
        if (!reader.string(key) || !reader.eat(':'))
          break;
        if (!reader.string(value) && !reader.unsignedInteger(number) &&
            !reader.skipValue())
          break;
      } while (reader.eat(','));
    }
  }
  {
    // A cluster spec's numbers: finite when read.
    JsonReader reader(text);
    double number;
    if (reader.number(number) && !std::isfinite(number))
      __builtin_trap();
  }
  {
    // A whole cluster spec (runtime/cluster/ClusterSpec.h).
    ClusterSpec spec;
    (void)parseClusterSpec(text, spec);
  }
  {
    // A calibration (runtime/cluster/Calibration.h): any time it reads is
    // a finite number of seconds per call, never negative.
    Calibration calibration;
    if (calibration.parse(text).empty())
      for (const char *name : {"gemm", "add"}) {
        double seconds = calibration.secondsPerCall(name, "[8] f32");
        if (seconds != -1 && !(std::isfinite(seconds) && seconds >= 0))
          __builtin_trap();
      }
  }
  std::string out;
  bool found = false;
  (void)jsonStringField(text, "text", out, &found);
  // What strata writes reads back as it was.
  std::string written = jsonString(text), back;
  JsonReader again(written);
  if (!again.string(back) || !again.done())
    __builtin_trap();
  return 0;
}
