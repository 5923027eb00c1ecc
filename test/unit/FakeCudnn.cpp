//===- FakeCudnn.cpp - libcudnn.so.9 where no GPU is ----------------------===//
//
// A shared library standing in for cuDNN: the entry points strata's table
// looks up (runtime/cuda/Cudnn.h). cudnnGetVersion answers
// STRATA_FAKE_CUDNN_VERSION (9.19.0 when unset), so a test can show what
// strata does with a cuDNN too old to use. The backend descriptors are
// recorded: every create, attribute (its values as read from the caller's
// array, by the attribute's type), finalize, execute and destroy is a line
// of a log a test reads (strataFakeCudnnLog), and a test can make one call
// fail with a status (strataFakeCudnnFail), say how many engine
// configurations the heuristics find, whether their engines say they are
// not deterministic, and what workspace a plan needs.
//
//===----------------------------------------------------------------------===//
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

// cuDNN's numbers for what the fake answers (cudnn_graph_v9.h).
enum : int {
  kTypeInt64 = 3,
  kTypeFloat = 4,
  kTypeDouble = 5,
  kTypeVoidPtr = 6,
  kTypeBackendDescriptor = 15,
  kTypeBoolean = 2,
  kTypeChar = 24,
  kEngineHeurResults = 202,
  kEngineCfgEngine = 300,
  kEngineCfgWorkspace = 303,
  kPlanWorkspace = 402,
  kEngineNumericalNote = 1303,
  kStatusBadParam = 2000,
  kNoteNondeterministic = 4,
};

struct Descriptor {
  int id, type;
};

struct State {
  std::vector<std::unique_ptr<Descriptor>> descriptors;
  std::string log;
  std::string failCall;
  int failType = -1, failStatus = 0;
  int64_t engines = 1, workspace = 0;
  bool nondeterministic = false;
};

State &state() {
  static State s;
  return s;
}

std::string name(const void *descriptor) {
  if (!descriptor)
    return "null";
  return "#" + std::to_string(static_cast<const Descriptor *>(descriptor)->id);
}

/// The status `call` on a descriptor of `type` is to return (0: success).
int failing(const char *call, int type) {
  State &s = state();
  if (s.failCall != call || (s.failType != -1 && s.failType != type))
    return 0;
  s.failCall.clear();
  s.log +=
      std::string(call) + " fails with " + std::to_string(s.failStatus) + "\n";
  return s.failStatus;
}

size_t elementBytes(int type) {
  switch (type) {
  case kTypeInt64:
  case kTypeDouble:
  case kTypeVoidPtr:
  case kTypeBackendDescriptor:
  case 0: // a handle
    return 8;
  case kTypeBoolean:
  case kTypeChar:
    return 1;
  case 26: // a fraction: two int64
    return 16;
  default: // float, int32 and the enums
    return 4;
  }
}

std::string values(int type, int64_t count, const void *elements) {
  std::string text;
  const char *bytes = static_cast<const char *>(elements);
  for (int64_t i = 0; i < count; ++i) {
    const char *at = bytes + i * elementBytes(type);
    text += i ? " " : "";
    switch (type) {
    case kTypeInt64: {
      int64_t v;
      std::memcpy(&v, at, 8);
      text += std::to_string(v);
      break;
    }
    case kTypeFloat: {
      float v;
      std::memcpy(&v, at, 4);
      char buffer[32];
      std::snprintf(buffer, sizeof buffer, "%.9g", double(v));
      text += buffer;
      break;
    }
    case kTypeDouble: {
      double v;
      std::memcpy(&v, at, 8);
      char buffer[32];
      std::snprintf(buffer, sizeof buffer, "%.17g", v);
      text += buffer;
      break;
    }
    case kTypeBackendDescriptor: {
      void *v;
      std::memcpy(&v, at, 8);
      text += name(v);
      break;
    }
    case kTypeVoidPtr:
    case 0:
      text += "ptr";
      break;
    case kTypeBoolean:
    case kTypeChar:
      text += std::to_string(int(*at));
      break;
    case 26: {
      int64_t v[2];
      std::memcpy(v, at, 16);
      text += std::to_string(v[0]) + "/" + std::to_string(v[1]);
      break;
    }
    default: {
      int32_t v;
      std::memcpy(&v, at, 4);
      text += std::to_string(v);
    }
    }
  }
  return text;
}

} // namespace

extern "C" {

size_t cudnnGetVersion() {
  const char *version = std::getenv("STRATA_FAKE_CUDNN_VERSION");
  return version ? size_t(std::strtoull(version, nullptr, 10)) : 91900;
}
const char *cudnnGetErrorString(int status) {
  static thread_local std::string text;
  text = "CUDNN_STATUS_" + std::to_string(status);
  return text.c_str();
}
int cudnnCreate(void **handle) {
  static int handleObject;
  if (int status = failing("cudnnCreate", -1))
    return status;
  *handle = &handleObject;
  return 0;
}
int cudnnDestroy(void *) { return 0; }
int cudnnSetStream(void *, void *) { return 0; }

int cudnnBackendCreateDescriptor(int type, void **descriptor) {
  if (int status = failing("cudnnBackendCreateDescriptor", type))
    return status;
  State &s = state();
  s.descriptors.push_back(std::make_unique<Descriptor>(
      Descriptor{int(s.descriptors.size()) + 1, type}));
  *descriptor = s.descriptors.back().get();
  s.log +=
      "create " + name(*descriptor) + " type " + std::to_string(type) + "\n";
  return 0;
}
int cudnnBackendDestroyDescriptor(void *descriptor) {
  state().log += "destroy " + name(descriptor) + "\n";
  return 0;
}
int cudnnBackendFinalize(void *descriptor) {
  if (!descriptor)
    return kStatusBadParam;
  if (int status = failing("cudnnBackendFinalize",
                           static_cast<Descriptor *>(descriptor)->type))
    return status;
  state().log += "finalize " + name(descriptor) + "\n";
  return 0;
}
int cudnnBackendSetAttribute(void *descriptor, int attribute, int type,
                             int64_t count, const void *elements) {
  if (!descriptor || count < 0 || (count > 0 && !elements))
    return kStatusBadParam;
  if (int status = failing("cudnnBackendSetAttribute",
                           static_cast<Descriptor *>(descriptor)->type))
    return status;
  state().log += "set " + name(descriptor) + " " + std::to_string(attribute) +
                 " type " + std::to_string(type) + ": " +
                 values(type, count, elements) + "\n";
  return 0;
}
int cudnnBackendGetAttribute(void *descriptor, int attribute, int type,
                             int64_t requested, int64_t *count,
                             void *elements) {
  if (!descriptor)
    return kStatusBadParam;
  if (int status = failing("cudnnBackendGetAttribute",
                           static_cast<Descriptor *>(descriptor)->type))
    return status;
  State &s = state();
  s.log += "get " + name(descriptor) + " " + std::to_string(attribute) + "\n";
  int64_t n = 0;
  if (attribute == kEngineHeurResults && type == kTypeBackendDescriptor) {
    // Asked for none: how many there are.
    n = requested == 0 || requested > s.engines ? s.engines : requested;
  } else if (attribute == kEngineCfgEngine && requested >= 1) {
    n = 1; // the caller's engine descriptor now describes it
  } else if ((attribute == kPlanWorkspace ||
              attribute == kEngineCfgWorkspace) &&
             type == kTypeInt64 && requested >= 1) {
    std::memcpy(elements, &s.workspace, 8);
    n = 1;
  } else if (attribute == kEngineNumericalNote && s.nondeterministic &&
             requested >= 1) {
    const int note = kNoteNondeterministic;
    std::memcpy(elements, &note, 4);
    n = 1;
  }
  if (count)
    *count = n;
  return 0;
}
int cudnnBackendExecute(void *, void *plan, void *pack) {
  if (int status = failing("cudnnBackendExecute", -1))
    return status;
  state().log += "execute " + name(plan) + " " + name(pack) + "\n";
  return 0;
}

// The test's side.
const char *strataFakeCudnnLog() { return state().log.c_str(); }
void strataFakeCudnnReset() {
  State &s = state();
  s.log.clear();
  s.failCall.clear();
  s.engines = 1;
  s.workspace = 0;
  s.nondeterministic = false;
}
void strataFakeCudnnFail(const char *call, int descriptorType, int status) {
  State &s = state();
  s.failCall = call;
  s.failType = descriptorType;
  s.failStatus = status;
}
void strataFakeCudnnEngines(int64_t engines) { state().engines = engines; }
void strataFakeCudnnWorkspace(int64_t bytes) { state().workspace = bytes; }
void strataFakeCudnnNondeterministic(int yes) {
  state().nondeterministic = yes != 0;
}
}
