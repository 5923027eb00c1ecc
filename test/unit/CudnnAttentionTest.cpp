//===- CudnnAttentionTest.cpp - the graphs strata builds for cuDNN --------===//
//
// runtime/cuda/CudnnAttention against a stand-in libcudnn.so.9
// (FakeCudnn.cpp) that records every descriptor call: the recorded calls
// are read back into the graph cuDNN would be given (its operations in
// order, each with its tensors), which the tests compare with the graph
// cuDNN's frontend builds for scaled dot-product attention; and each
// failure cuDNN can answer with becomes one line, never a crash.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/CudnnAttention.h"
#include "runtime/cuda/AttentionRunner.h"

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>

using namespace strata::runtime;
using namespace strata::runtime::cuda;
namespace fs = std::filesystem;

namespace {

/// The stand-in, loaded as cuDNN (once a process: STRATA_CUDA_LIBS names
/// a folder holding it as libcudnn.so.9), and its controls.
struct Fake {
  const CudnnApi *api = nullptr;
  const char *(*log)() = nullptr;
  void (*reset)() = nullptr;
  void (*fail)(const char *, int, int) = nullptr;
  void (*engines)(int64_t) = nullptr;
  void (*workspace)(int64_t) = nullptr;
  void (*nondeterministic)(int) = nullptr;
};

Fake &fake() {
  static Fake f = [] {
    Fake f;
    fs::path folder = fs::temp_directory_path() /
                      ("strata-cudnn-" + std::to_string(getpid()));
    fs::create_directories(folder);
    fs::copy_file(STRATA_FAKE_CUDNN_LIBRARY, folder / "libcudnn.so.9",
                  fs::copy_options::overwrite_existing);
    setenv("STRATA_CUDA_LIBS", folder.c_str(), 1);
    std::string error;
    f.api = loadCudnn(error);
    EXPECT_NE(f.api, nullptr) << error;
    if (!f.api)
      return f;
    void *h = f.api->library.handle;
    f.log = reinterpret_cast<const char *(*)()>(dlsym(h, "strataFakeCudnnLog"));
    f.reset = reinterpret_cast<void (*)()>(dlsym(h, "strataFakeCudnnReset"));
    f.fail = reinterpret_cast<void (*)(const char *, int, int)>(
        dlsym(h, "strataFakeCudnnFail"));
    f.engines =
        reinterpret_cast<void (*)(int64_t)>(dlsym(h, "strataFakeCudnnEngines"));
    f.workspace = reinterpret_cast<void (*)(int64_t)>(
        dlsym(h, "strataFakeCudnnWorkspace"));
    f.nondeterministic = reinterpret_cast<void (*)(int)>(
        dlsym(h, "strataFakeCudnnNondeterministic"));
    return f;
  }();
  return f;
}

/// The recorded calls, read back: each descriptor's type and attributes.
struct Recorded {
  struct Descriptor {
    int type = -1;
    bool finalized = false;
    std::map<int, std::string> attributes; // the values as the log has them
  };
  std::map<std::string, Descriptor> descriptors; // by "#N"
  std::vector<std::string> executes;

  explicit Recorded(const std::string &log) {
    std::istringstream lines(log);
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream in(line);
      std::string verb, id;
      in >> verb >> id;
      if (verb == "create") {
        std::string word;
        in >> word >> descriptors[id].type;
      } else if (verb == "finalize") {
        descriptors[id].finalized = true;
      } else if (verb == "set") {
        int attribute;
        in >> attribute;
        size_t colon = line.find(": ");
        descriptors[id].attributes[attribute] =
            colon == std::string::npos ? "" : line.substr(colon + 2);
      } else if (verb == "execute") {
        executes.push_back(line);
      }
    }
  }

  const Descriptor &at(const std::string &id) const {
    static const Descriptor none;
    auto it = descriptors.find(id);
    return it == descriptors.end() ? none : it->second;
  }

  /// A tensor as a test reads it: its name (the operands') or %uid (a
  /// virtual one), its type and dims; with strides when `strides`.
  std::string tensor(const std::string &id, bool strides = false) const {
    const Descriptor &d = at(id);
    static const std::map<std::string, std::string> names = {
        {"1", "q"},      {"2", "k"},      {"3", "v"},     {"4", "o"},
        {"5", "lse"},    {"6", "dout"},   {"7", "dq"},    {"8", "dk"},
        {"9", "dv"},     {"10", "scale"}, {"11", "-inf"}, {"12", "one"},
        {"13", "rowsum"}};
    std::string uid = d.attributes.count(906) ? d.attributes.at(906) : "?";
    std::string name = names.count(uid) ? names.at(uid) : "%" + uid;
    static const std::map<std::string, std::string> types = {
        {"0", "f32"}, {"4", "i32"}, {"9", "bf16"}, {"11", "bool"}};
    std::string type =
        d.attributes.count(901) && types.count(d.attributes.at(901))
            ? types.at(d.attributes.at(901))
            : "?";
    std::string text = name + ":" + type + "(" +
                       (d.attributes.count(902) ? d.attributes.at(902) : "") +
                       ")";
    if (strides)
      text +=
          "/(" + (d.attributes.count(903) ? d.attributes.at(903) : "") + ")";
    if (!d.finalized)
      text += "!unfinalized";
    return text;
  }

  /// The last operation graph's operations, a line each.
  std::vector<std::string> graph() const {
    std::string last;
    for (const auto &[id, d] : descriptors)
      if (d.type == 15 &&
          (last.empty() || std::stoi(id.substr(1)) > std::stoi(last.substr(1))))
        last = id;
    std::vector<std::string> ops;
    if (last.empty())
      return ops;
    std::istringstream list(
        at(last).attributes.count(801) ? at(last).attributes.at(801) : "");
    static const std::map<std::string, std::string> modes = {
        {"0", "add"},       {"1", "mul"},      {"6", "div"},
        {"9", "sub"},       {"13", "exp"},     {"15", "log"},
        {"21", "identity"}, {"303", "cmp_ge"}, {"501", "gen_index"},
        {"601", "select"}};
    std::string op;
    while (list >> op) {
      const Descriptor &d = at(op);
      auto operand = [&](int attribute) {
        return d.attributes.count(attribute)
                   ? tensor(d.attributes.at(attribute))
                   : std::string();
      };
      std::string text;
      if (d.type == 19) {
        text = "matmul " + operand(1520) + " " + operand(1521) + " -> " +
               operand(1522);
      } else if (d.type == 13) {
        const Descriptor &pw = at(d.attributes.at(750));
        std::string mode =
            pw.attributes.count(0) && modes.count(pw.attributes.at(0))
                ? modes.at(pw.attributes.at(0))
                : "?";
        if (pw.attributes.count(9))
          mode += " axis " + pw.attributes.at(9);
        text = mode + " " + operand(751);
        if (d.attributes.count(752))
          text += " " + operand(752);
        if (d.attributes.count(758))
          text += " " + operand(758);
        text += " -> " + operand(753);
      } else if (d.type == 22) {
        const Descriptor &r = at(d.attributes.at(1612));
        text =
            std::string(r.attributes.count(1600) && r.attributes.at(1600) == "3"
                            ? "max"
                            : "sum") +
            " " + operand(1610) + " -> " + operand(1611);
      } else if (d.type == 31) {
        text = "reshape " + operand(2200) + " -> " + operand(2201);
      } else {
        text = "type " + std::to_string(d.type);
      }
      if (!d.finalized)
        text += " !unfinalized";
      ops.push_back(text);
    }
    return ops;
  }
};

std::string joined(const std::vector<std::string> &lines) {
  std::string text;
  for (const std::string &line : lines)
    text += line + "\n";
  return text;
}

/// gpt-tiny's attention at a small shape: batch 2, 8 queries and keys, 4
/// heads of 16.
CudnnAttentionShape small(bool causal, bool backward) {
  CudnnAttentionShape s;
  s.batch = 2;
  s.seq = s.keys = 8;
  s.heads = s.kvHeads = 4;
  s.dim = 16;
  s.causal = causal;
  s.backward = backward;
  s.scale = 0.25f;
  return s;
}

void *const kHandle = reinterpret_cast<void *>(0x1);

} // namespace

TEST(CudnnAttention, CausalForwardIsTheFrontendsGraph) {
  Fake &f = fake();
  ASSERT_NE(f.api, nullptr);
  f.reset();
  {
    CudnnAttention attention(*f.api, small(true, false));
    ASSERT_EQ(attention.prepare(kHandle, 1 << 20), "");
    Recorded recorded(f.log());
    EXPECT_EQ(
        joined(recorded.graph()),
        "matmul q:bf16(2 4 8 16) k:bf16(2 4 16 8) -> %100:f32(2 4 8 8)\n"
        "mul %100:f32(2 4 8 8) scale:f32(1 1 1 1) -> %101:f32(2 4 8 8)\n"
        "gen_index axis 2 %101:f32(2 4 8 8) -> %102:i32(2 4 8 8)\n"
        "gen_index axis 3 %101:f32(2 4 8 8) -> %103:i32(2 4 8 8)\n"
        "cmp_ge %102:i32(2 4 8 8) %103:i32(2 4 8 8) -> %104:bool(2 4 8 8)\n"
        "select %101:f32(2 4 8 8) -inf:f32(1 1 1 1) %104:bool(2 4 8 8) "
        "-> %105:f32(2 4 8 8)\n"
        "max %105:f32(2 4 8 8) -> %106:f32(2 4 8 1)\n"
        "sub %105:f32(2 4 8 8) %106:f32(2 4 8 1) -> %107:f32(2 4 8 8)\n"
        "exp %107:f32(2 4 8 8) -> %108:f32(2 4 8 8)\n"
        "sum %108:f32(2 4 8 8) -> %109:f32(2 4 8 1)\n"
        "log %109:f32(2 4 8 1) -> %110:f32(2 4 8 1)\n"
        "add %106:f32(2 4 8 1) %110:f32(2 4 8 1) -> lse:f32(2 4 8 1)\n"
        "div %108:f32(2 4 8 8) %109:f32(2 4 8 1) -> %111:bf16(2 4 8 8)\n"
        "matmul %111:bf16(2 4 8 8) v:bf16(2 4 8 16) -> o:bf16(2 4 8 16)\n");
    // strata's [batch, seq, heads, dim] as cuDNN's (b, h, s, d); K read
    // transposed; the log-sum-exp strata's [batch, heads, seq].
    std::map<std::string, std::string> byName;
    for (const auto &[id, d] : recorded.descriptors)
      if (d.type == 17)
        byName[recorded.tensor(id).substr(0, recorded.tensor(id).find(':'))] =
            recorded.tensor(id, true);
    EXPECT_EQ(byName["q"], "q:bf16(2 4 8 16)/(512 16 64 1)");
    EXPECT_EQ(byName["k"], "k:bf16(2 4 16 8)/(512 16 1 64)");
    EXPECT_EQ(byName["v"], "v:bf16(2 4 8 16)/(512 16 64 1)");
    EXPECT_EQ(byName["lse"], "lse:f32(2 4 8 1)/(32 8 1 1)");
    EXPECT_EQ(byName["scale"], "scale:f32(1 1 1 1)/(1 1 1 1)");
  }
  // Every descriptor made is destroyed with the attention.
  std::string log = f.log();
  size_t creates = 0, destroys = 0;
  for (size_t at = 0; (at = log.find("create #", at)) != std::string::npos;
       ++at)
    ++creates;
  for (size_t at = 0; (at = log.find("destroy #", at)) != std::string::npos;
       ++at)
    ++destroys;
  EXPECT_EQ(creates, destroys);
}

TEST(CudnnAttention, GroupedQueryCausalBackwardIsTheDeterministicGraph) {
  Fake &f = fake();
  ASSERT_NE(f.api, nullptr);
  f.reset();
  CudnnAttentionShape s = small(true, true);
  s.kvHeads = 2;
  s.groupSize = 2;
  CudnnAttention attention(*f.api, s);
  ASSERT_EQ(attention.prepare(kHandle, 1 << 20), "");
  EXPECT_EQ(attention.rowSumBytes(), 2u * 4 * 8 * 4);
  // D = rowsum(dO∘O); P from the forward's lse, masked; dV and dK over
  // all query heads, summed into each kv head's; dQ by one product (no
  // f32 accumulator: the deterministic form).
  EXPECT_EQ(
      joined(Recorded(f.log()).graph()),
      "mul dout:bf16(2 4 8 16) o:bf16(2 4 8 16) -> %100:f32(2 4 8 16)\n"
      "sum %100:f32(2 4 8 16) -> %101:f32(2 4 8 1)\n"
      "mul %101:f32(2 4 8 1) one:f32(1 1 1 1) -> rowsum:f32(2 4 8 1)\n"
      "matmul q:bf16(2 4 8 16) k:bf16(2 2 16 8) -> %102:f32(2 4 8 8)\n"
      "mul %102:f32(2 4 8 8) scale:f32(1 1 1 1) -> %103:f32(2 4 8 8)\n"
      "sub %103:f32(2 4 8 8) lse:f32(2 4 8 1) -> %104:f32(2 4 8 8)\n"
      "gen_index axis 2 %104:f32(2 4 8 8) -> %105:i32(2 4 8 8)\n"
      "gen_index axis 3 %104:f32(2 4 8 8) -> %106:i32(2 4 8 8)\n"
      "cmp_ge %105:i32(2 4 8 8) %106:i32(2 4 8 8) -> %107:bool(2 4 8 8)\n"
      "select %104:f32(2 4 8 8) -inf:f32(1 1 1 1) %107:bool(2 4 8 8) -> "
      "%108:f32(2 4 8 8)\n"
      "exp %108:f32(2 4 8 8) -> %109:f32(2 4 8 8)\n"
      "reshape %109:f32(2 4 8 8) -> %110:bf16(2 4 8 8)\n"
      "matmul %110:bf16(2 4 8 8) dout:bf16(2 4 8 16) -> %111:bf16(2 4 8 16)\n"
      "sum %111:bf16(2 4 8 16) -> dv:bf16(2 2 8 16)\n"
      "matmul dout:bf16(2 4 8 16) v:bf16(2 2 16 8) -> %112:f32(2 4 8 8)\n"
      "sub %112:f32(2 4 8 8) rowsum:f32(2 4 8 1) -> %113:f32(2 4 8 8)\n"
      "mul %113:f32(2 4 8 8) %109:f32(2 4 8 8) -> %114:f32(2 4 8 8)\n"
      "mul %114:f32(2 4 8 8) scale:f32(1 1 1 1) -> %115:f32(2 4 8 8)\n"
      "reshape %115:f32(2 4 8 8) -> %116:bf16(2 4 8 8)\n"
      "matmul %116:bf16(2 4 8 8) q:bf16(2 4 8 16) -> %117:bf16(2 4 8 16)\n"
      "sum %117:bf16(2 4 8 16) -> dk:bf16(2 2 8 16)\n"
      "reshape k:bf16(2 2 16 8) -> %118:bf16(2 2 8 16)\n"
      "matmul %115:f32(2 4 8 8) %118:bf16(2 2 8 16) -> dq:bf16(2 4 8 16)\n");
}

TEST(CudnnAttention, WithoutTheMaskAndAtHeadDim128) {
  Fake &f = fake();
  ASSERT_NE(f.api, nullptr);
  for (bool backward : {false, true}) {
    f.reset();
    CudnnAttentionShape s = small(false, backward);
    s.dim = 128;
    s.seq = 2048;
    s.keys = 2048;
    CudnnAttention attention(*f.api, s);
    ASSERT_EQ(attention.prepare(kHandle, 1 << 20), "");
    std::string graph = joined(Recorded(f.log()).graph());
    EXPECT_EQ(graph.find("gen_index"), std::string::npos) << graph;
    EXPECT_EQ(graph.find("-inf"), std::string::npos) << graph;
    // MHA: the gradients of k and v straight from their products.
    for (const std::string &line : Recorded(f.log()).graph())
      if (line.find("-> dk:") != std::string::npos ||
          line.find("-> dv:") != std::string::npos)
        EXPECT_EQ(line.rfind("matmul ", 0), 0u) << line;
    EXPECT_NE(graph.find(backward ? "-> dq:bf16(2 4 2048 128)"
                                  : "-> o:bf16(2 4 2048 128)"),
              std::string::npos)
        << graph;
    EXPECT_EQ(Recorded(f.log()).graph().size(), backward ? 17u : 10u) << graph;
  }
}

TEST(CudnnAttention, RunPassesEveryOperandByItsUid) {
  Fake &f = fake();
  ASSERT_NE(f.api, nullptr);
  f.reset();
  CudnnAttention attention(*f.api, small(true, true));
  ASSERT_EQ(attention.prepare(kHandle, 1 << 20), "");
  char buffers[12];
  CudnnAttention::Pointers p;
  p.q = buffers + 0, p.k = buffers + 1, p.v = buffers + 2, p.o = buffers + 3;
  p.lse = buffers + 4, p.dout = buffers + 5, p.dq = buffers + 6;
  p.dk = buffers + 7, p.dv = buffers + 8, p.rowSum = buffers + 9;
  p.workspace = buffers + 10;
  ASSERT_EQ(attention.run(kHandle, nullptr, p), "");
  Recorded recorded(f.log());
  ASSERT_EQ(recorded.executes.size(), 1u);
  // The pack: every operand the graph does not keep virtual, by uid
  // (q k v o lse scale -inf dout dq dk dv one rowsum), then finalized.
  bool found = false;
  for (const auto &[id, d] : recorded.descriptors)
    if (d.type == 16) {
      found = true;
      EXPECT_EQ(d.attributes.at(1000), "1 2 3 4 5 10 11 6 7 8 9 12 13");
      EXPECT_EQ(d.attributes.at(1001),
                "ptr ptr ptr ptr ptr ptr ptr ptr ptr ptr "
                "ptr ptr ptr");
      EXPECT_TRUE(d.finalized);
    }
  EXPECT_TRUE(found);
}

// Each answer cuDNN can give that is not success is one line: the call,
// what it was on, and cuDNN's status text.
TEST(CudnnAttention, EveryFailureIsOneLine) {
  Fake &f = fake();
  ASSERT_NE(f.api, nullptr);
  auto prepared = [&](auto setUp, uint64_t maxWorkspace = 1 << 20) {
    f.reset();
    setUp();
    CudnnAttention attention(*f.api, small(true, false));
    std::string error = attention.prepare(kHandle, maxWorkspace);
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    return error;
  };
  // A graph cuDNN does not take (CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN).
  EXPECT_EQ(prepared([&] { f.fail("cudnnBackendFinalize", 15, 3001); }),
            "cudnnBackendFinalize(operation graph): CUDNN_STATUS_3001");
  // A tensor it will not describe.
  EXPECT_EQ(prepared([&] { f.fail("cudnnBackendFinalize", 17, 3003); }),
            "cudnnBackendFinalize(tensor): CUDNN_STATUS_3003");
  // No descriptor at all.
  EXPECT_EQ(prepared([&] { f.fail("cudnnBackendCreateDescriptor", -1, 4003); }),
            "cudnnBackendCreateDescriptor(tensor): CUDNN_STATUS_4003");
  // No engine.
  EXPECT_EQ(prepared([&] { f.engines(0); }),
            "cuDNN's heuristics found no engine for this graph");
  // Engines that are not deterministic are passed over.
  EXPECT_EQ(prepared([&] { f.nondeterministic(1); }),
            "cuDNN offered only engines that are not deterministic");
  // An engine whose notes cannot be read: its determinism is unknown, so
  // the next is tried.
  EXPECT_EQ(prepared([&] { f.fail("cudnnBackendGetAttribute", 2, 4000); }),
            "cudnnBackendGetAttribute(engine): CUDNN_STATUS_4000");
  EXPECT_EQ(prepared([&] {
              f.engines(2);
              f.fail("cudnnBackendGetAttribute", 2, 4000);
            }),
            "");
  // A workspace past what strata sets aside.
  EXPECT_EQ(prepared([&] { f.workspace(64 << 20); }, 32 << 20),
            "cuDNN's engine needs 67108864 bytes of workspace, more than the "
            "33554432 strata sets aside");
  // An engine that cannot run it: the next one is tried; the only one
  // failing is the reason.
  EXPECT_EQ(prepared([&] { f.fail("cudnnBackendFinalize", 5, 3007); }),
            "cudnnBackendFinalize(execution plan): CUDNN_STATUS_3007");
  EXPECT_EQ(prepared([&] {
              f.engines(2);
              f.fail("cudnnBackendFinalize", 5, 3007);
            }),
            "");
  // A fault, not a refusal: not passed over.
  EXPECT_EQ(prepared([&] {
              f.engines(2);
              f.fail("cudnnBackendFinalize", 5, 4000);
            }),
            "cudnnBackendFinalize(execution plan): CUDNN_STATUS_4000");

  // And a run whose execution fails.
  f.reset();
  CudnnAttention attention(*f.api, small(false, false));
  ASSERT_EQ(attention.prepare(kHandle, 1 << 20), "");
  f.fail("cudnnBackendExecute", -1, 5000);
  EXPECT_EQ(attention.run(kHandle, nullptr, {}),
            "cudnnBackendExecute: CUDNN_STATUS_5000");
}

TEST(CudnnAttention, WhatItDoesNotTakeIsSaid) {
  CudnnAttentionShape s = small(true, false);
  EXPECT_EQ(cudnnAttentionUnsupported(s, 91900), "");
  CudnnAttentionShape fp32 = s;
  fp32.bf16 = false;
  EXPECT_EQ(cudnnAttentionUnsupported(fp32, 91900),
            "its operands are fp32 (cuDNN's fused attention takes bf16)");
  CudnnAttentionShape odd = s;
  odd.dim = 72 + 4;
  EXPECT_EQ(cudnnAttentionUnsupported(odd, 91900),
            "head dimension 76 is not a multiple of 8");
  CudnnAttentionShape wide = s;
  wide.dim = 256;
  EXPECT_EQ(cudnnAttentionUnsupported(wide, 91900),
            "head dimension 256 is over 128");
  // Grouped-query: cuDNN's grouping is strata's on a rank that holds
  // whole groups from its first head.
  CudnnAttentionShape grouped = s;
  grouped.heads = 8;
  grouped.kvHeads = 2;
  grouped.groupSize = 4;
  EXPECT_EQ(cudnnAttentionUnsupported(grouped, 91900), "");
  grouped.queryHeadOffset = 2; // half a group before this rank's heads
  EXPECT_EQ(cudnnAttentionUnsupported(grouped, 91900),
            "query head 2 reads kv head 1, not the one cuDNN's grouping "
            "gives it");
  CudnnAttentionShape uneven = s;
  uneven.kvHeads = 3;
  EXPECT_EQ(cudnnAttentionUnsupported(uneven, 91900),
            "4 query heads are not a multiple of 3 kv heads");
  EXPECT_EQ(cudnnAttentionUnsupported(s, 91001),
            "cuDNN 9.10.0 and 9.10.1 have known faults in this attention");
  // Context parallelism: the ring's step 0 (a rank's rows against its own)
  // masks by the diagonal; its later steps and the gathered keys do not.
  CudnnAttentionShape context = small(true, false);
  context.context = 2;
  EXPECT_EQ(cudnnAttentionUnsupported(context, 91900), "");
  context.ringStep = 1;
  EXPECT_EQ(cudnnAttentionUnsupported(context, 91900),
            "the ring's step 1 masks by places in the sequence, not the "
            "diagonal");
  context.causal = false; // unmasked: places do not matter
  EXPECT_EQ(cudnnAttentionUnsupported(context, 91900), "");
  context.keys = 2 * context.seq;
  EXPECT_EQ(cudnnAttentionUnsupported(context, 91900),
            "context-parallel attention over every rank's keys, gathered");
  CudnnAttentionShape single = small(false, true);
  single.seq = single.keys = 1;
  EXPECT_EQ(cudnnAttentionUnsupported(single, 91900),
            "a backward over one query and one key");
}

namespace {

/// An attention_fwd launch over [2, 8, 4, 16] bf16 operands (or fp32),
/// each at an offset that keeps it 256-byte aligned.
struct ForwardLaunch {
  std::vector<Buffer> buffers;
  LaunchOp op;
  explicit ForwardLaunch(DType type, uint64_t misalign = 0) {
    auto buffer = [&](DType dtype, std::vector<int64_t> shape) {
      Buffer b;
      b.dtype = dtype;
      b.shape = shape;
      b.offset = 256 * buffers.size() + misalign;
      buffers.push_back(b);
      return uint32_t(buffers.size() - 1);
    };
    op.kernel = KernelId::AttentionFwd;
    op.code = 0;
    for (int i = 0; i < 4; ++i)
      op.operands.push_back(buffer(type, {2, 8, 4, 16}));
    op.operands.push_back(buffer(DType::F32, {2, 4, 8}));
    op.attrs.resize(kernelSpec(KernelId::AttentionFwd).attrs.size());
    op.attrs[kernels::AttentionFwd::attr::causal].i = 1;
    op.attrs[kernels::AttentionFwd::attr::group_size].i = 1;
    op.attrs[kernels::AttentionFwd::attr::query_head_offset].i = 0;
  }
};

} // namespace

TEST(AttentionRunner, EachChoiceAndItsFallback) {
  Fake &f = fake();
  ASSERT_NE(f.api, nullptr);
  f.reset();
  ForwardLaunch bf16(DType::BF16), fp32(DType::F32), skewed(DType::BF16, 8);
  ForwardLaunch again(DType::BF16); // another layer of the same shape
  uint64_t workspace = 0, rowSum = 0;
  f.workspace(4096);

  // The plan's own kernels: cuDNN is not asked.
  AttentionRunner own(AttentionBackend::Strata);
  ASSERT_EQ(own.create(), "");
  ASSERT_EQ(own.prepare(bf16.op, bf16.buffers, workspace, rowSum), "");
  EXPECT_FALSE(own.runs(bf16.op));
  EXPECT_EQ(own.report(),
            "attention: strata's kernels (--attention-backend strata)");
  EXPECT_EQ(std::string(f.log()).find("create"), std::string::npos);

  // auto: cuDNN where it takes the launch, strata's kernels with the
  // reason where not.
  AttentionRunner automatic(AttentionBackend::Auto);
  ASSERT_EQ(automatic.create(), "");
  ASSERT_EQ(automatic.prepare(bf16.op, bf16.buffers, workspace, rowSum), "");
  EXPECT_TRUE(automatic.runs(bf16.op));
  // A second launch of that shape shares its plan: no new descriptors.
  size_t made = Recorded(f.log()).descriptors.size();
  ASSERT_EQ(automatic.prepare(again.op, again.buffers, workspace, rowSum), "");
  EXPECT_TRUE(automatic.runs(again.op));
  EXPECT_EQ(Recorded(f.log()).descriptors.size(), made);
  EXPECT_EQ(workspace, 4096u); // the plan's, as cuDNN said
  ASSERT_EQ(automatic.prepare(fp32.op, fp32.buffers, workspace, rowSum), "");
  EXPECT_FALSE(automatic.runs(fp32.op));
  ASSERT_EQ(automatic.prepare(skewed.op, skewed.buffers, workspace, rowSum),
            "");
  EXPECT_FALSE(automatic.runs(skewed.op));
  EXPECT_EQ(automatic.report(),
            "attention: cuDNN 9.19.0 (" + f.api->library.path +
                ") for 2 launches (1 plan); strata's kernels for 2 (its "
                "operands are fp32 (cuDNN's fused attention takes bf16))");
  EXPECT_EQ(rowSum, 0u); // forwards take no scratch

  // cudnn: a launch it cannot take is a refusal naming why.
  AttentionRunner only(AttentionBackend::Cudnn);
  ASSERT_EQ(only.create(), "");
  EXPECT_EQ(only.prepare(skewed.op, skewed.buffers, workspace, rowSum),
            "--attention-backend cudnn: cuDNN cannot run this attention "
            "launch: an operand is not 16-byte aligned");
  f.reset();
  f.engines(0);
  EXPECT_EQ(only.prepare(bf16.op, bf16.buffers, workspace, rowSum),
            "--attention-backend cudnn: cuDNN cannot run this attention "
            "launch: cuDNN's heuristics found no engine for this graph");
  // The same shape again: the same answer, not asked of cuDNN again.
  size_t asked = Recorded(f.log()).descriptors.size();
  EXPECT_EQ(only.prepare(again.op, again.buffers, workspace, rowSum),
            "--attention-backend cudnn: cuDNN cannot run this attention "
            "launch: cuDNN's heuristics found no engine for this graph");
  EXPECT_EQ(Recorded(f.log()).descriptors.size(), asked);

  // A cuDNN that will not make a handle: auto goes on without it.
  f.reset();
  f.fail("cudnnCreate", -1, 1001);
  AttentionRunner noHandle(AttentionBackend::Auto);
  ASSERT_EQ(noHandle.create(), "");
  ASSERT_EQ(noHandle.prepare(bf16.op, bf16.buffers, workspace, rowSum), "");
  EXPECT_FALSE(noHandle.runs(bf16.op));
  EXPECT_EQ(noHandle.report(), "attention: strata's kernels for 1 "
                               "(cudnnCreate: CUDNN_STATUS_1001)");
  f.fail("cudnnCreate", -1, 1001);
  AttentionRunner refused(AttentionBackend::Cudnn);
  EXPECT_EQ(refused.create(),
            "--attention-backend cudnn: cudnnCreate: CUDNN_STATUS_1001");
}
