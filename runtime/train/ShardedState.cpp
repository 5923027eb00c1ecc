//===- ShardedState.cpp - a rank's training state, as shards --------------===//
#include "runtime/train/ShardedState.h"
#include "runtime/exec/Parameters.h"
#include "runtime/train/ParameterGather.h"

#include <sstream>

namespace strata::runtime {

namespace {

/// Each local element's index in the global tensor, -1 for padding.
std::vector<int64_t> globalIndices(const Param &param,
                                   const std::vector<int64_t> &local) {
  int64_t count = 1;
  for (int64_t extent : local)
    count *= extent;
  std::vector<int64_t> out(size_t(count), -1);
  forEachShardElement(param, local,
                      [&](int64_t e, int64_t global, bool padding) {
                        out[e] = padding ? -1 : global;
                      });
  return out;
}

void putList(std::ostringstream &out, const char *name,
             const std::vector<int64_t> &values) {
  out << (out.tellp() > 0 ? " " : "") << name << " " << values.size();
  for (int64_t v : values)
    out << " " << v;
}

bool getList(std::istringstream &in, const char *name,
             std::vector<int64_t> &values, size_t most) {
  std::string word;
  size_t count = 0;
  // No more numbers than the text has room for.
  if (!(in >> word) || word != name || !(in >> count) || count > most)
    return false;
  values.resize(count);
  for (int64_t &v : values)
    if (!(in >> v))
      return false;
  return true;
}

int64_t product(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

} // namespace

RankShards shardsOf(Executor &executor) {
  const RankPlan &rank = executor.rankPlan();
  Backend &device = executor.device();
  std::vector<ParamPiece> pieces = piecesOf(executor);
  RankShards out;
  for (size_t p = 0; p < rank.params.size(); ++p) {
    const Param &param = rank.params[p];
    const Buffer &value = rank.buffers[param.value];
    std::vector<int64_t> exact, state;
    for (auto [begin, end] : pieces[p].exact)
      exact.insert(exact.end(), {begin, end - begin});
    // Sized first: the copies land when the stream gets to them.
    int64_t owned = 0;
    for (const StateSegment &segment : param.state) {
      state.insert(state.end(), {segment.begin, segment.length});
      owned += segment.length;
    }
    HostTensor expAvg{{owned}, std::vector<float>(size_t(owned))},
        expAvgSq{{owned}, std::vector<float>(size_t(owned))};
    int64_t at = 0;
    for (const StateSegment &segment : param.state) {
      for (auto [buffer, tensor] : {std::pair{rank.expAvg, &expAvg},
                                    std::pair{rank.expAvgSq, &expAvgSq}})
        device.copyOut(Stream::Compute, tensor->values.data() + at,
                       static_cast<char *>(executor.address(buffer)) +
                           segment.state * 4,
                       size_t(segment.length) * 4);
      at += segment.length;
    }
    std::ostringstream meta;
    putList(meta, "global", param.globalShape);
    putList(meta, "offset", param.shardOffset);
    putList(meta, "exact", exact);
    putList(meta, "state", state);
    out.metadata[param.name] = meta.str();
    out.tensors[param.name] = {value.shape, std::move(pieces[p].values)};
    // Moved, the vectors keep the storage the copies land in.
    if (!param.state.empty()) {
      out.tensors[param.name + ".exp_avg"] = std::move(expAvg);
      out.tensors[param.name + ".exp_avg_sq"] = std::move(expAvgSq);
    }
  }
  device.synchronizeCompute(); // once, for every parameter's copies
  return out;
}

std::string addShards(const RankShards &shards,
                      const std::map<std::string, std::vector<int64_t>> *wanted,
                      int64_t maxElements,
                      std::map<std::string, GlobalParam> &global) {
  for (const auto &[name, text] : shards.metadata) {
    if (name.rfind("strata.", 0) == 0)
      continue; // the file's own entries
    if (wanted && !wanted->count(name))
      continue;
    auto bad = [&](const std::string &what) {
      return "parameter '" + name + "': " + what;
    };
    Param param;
    std::vector<int64_t> exact, state;
    std::istringstream in(text);
    size_t most = text.size() / 2;
    if (!getList(in, "global", param.globalShape, most) ||
        !getList(in, "offset", param.shardOffset, most) ||
        !getList(in, "exact", exact, most) ||
        !getList(in, "state", state, most) ||
        param.shardOffset.size() != param.globalShape.size() ||
        exact.size() % 2 || state.size() % 2)
      return bad("its shard metadata is not readable");
    auto tensor = shards.tensors.find(name);
    if (tensor == shards.tensors.end())
      return bad("the metadata names a tensor the file lacks");
    const std::vector<int64_t> &local = tensor->second.shape;
    if (local.size() != param.globalShape.size())
      return bad("its shard and global shapes differ in rank");
    if (wanted && param.globalShape != wanted->at(name))
      return bad("it is " + shapeText(param.globalShape) +
                 " in the checkpoint, " + shapeText(wanted->at(name)) +
                 " in this model");
    if (!wanted) {
      // Sized by the shards' own word: bounded before anything is.
      int64_t elements = 1;
      for (int64_t d : param.globalShape) {
        if (d < 0 || (d > 0 && elements > maxElements / d))
          return bad("its global shape " + shapeText(param.globalShape) +
                     " is larger than the checkpoint");
        elements *= d;
      }
    }
    for (size_t d = 0; d < local.size(); ++d)
      if (param.shardOffset[d] < 0 || local[d] < 0 ||
          param.shardOffset[d] > (int64_t(1) << 40))
        return bad("its shard metadata is not readable");
    GlobalParam &g = global[name];
    int64_t total = product(param.globalShape);
    if (g.known.empty()) {
      g.shape = param.globalShape;
      g.value.assign(size_t(total), 0.0f);
      g.expAvg.assign(size_t(total), 0.0f);
      g.expAvgSq.assign(size_t(total), 0.0f);
      g.known.assign(size_t(total), 0);
      g.moments.assign(size_t(total), 0);
    } else if (g.shape != param.globalShape) {
      return bad("its shards disagree on the global shape");
    }
    std::vector<int64_t> where = globalIndices(param, local);
    const std::vector<float> &values = tensor->second.values;
    std::vector<uint8_t> isExact(where.size(), 0);
    // A range [begin, begin + length) inside `size`, without adding.
    auto inside = [](int64_t begin, int64_t length, size_t size) {
      return begin >= 0 && length >= 0 && begin <= int64_t(size) &&
             length <= int64_t(size) - begin;
    };
    for (size_t i = 0; i < exact.size(); i += 2) {
      if (!inside(exact[i], exact[i + 1], where.size()))
        return bad("an exact range lies outside its shard");
      std::fill_n(isExact.begin() + exact[i], exact[i + 1], 1);
    }
    for (size_t e = 0; e < where.size(); ++e) {
      int64_t at = where[e];
      if (at < 0 || at >= total)
        continue;
      // An exact value stays; any other is overwritten.
      if (g.known[at] < 2) {
        g.value[at] = values[e];
        g.known[at] = isExact[e] ? 2 : 1;
      }
    }
    if (state.empty())
      continue;
    auto first = shards.tensors.find(name + ".exp_avg"),
         second = shards.tensors.find(name + ".exp_avg_sq");
    int64_t owned = 0;
    for (size_t i = 0; i < state.size(); i += 2) {
      if (!inside(state[i], state[i + 1], where.size()))
        return bad("a moment range lies outside its shard");
      owned += state[i + 1]; // at most the shard's size per range
    }
    if (first == shards.tensors.end() || second == shards.tensors.end() ||
        int64_t(first->second.values.size()) != owned ||
        int64_t(second->second.values.size()) != owned)
      return bad("its moments do not match their ranges");
    int64_t k = 0;
    for (size_t i = 0; i < state.size(); i += 2) {
      for (int64_t e = state[i]; e < state[i] + state[i + 1]; ++e, ++k) {
        int64_t at = where[e];
        if (at < 0 || at >= total)
          continue;
        g.expAvg[at] = first->second.values[k];
        g.expAvgSq[at] = second->second.values[k];
        g.moments[at] = 1;
      }
    }
  }
  return "";
}

std::string restoreShards(Executor &executor,
                          const std::map<std::string, GlobalParam> &global) {
  const RankPlan &rank = executor.rankPlan();
  Backend &device = executor.device();
  for (const Param &param : rank.params) {
    auto it = global.find(param.name);
    if (it == global.end())
      return "the checkpoint has no parameter '" + param.name + "'";
    const GlobalParam &g = it->second;
    if (g.shape != param.globalShape)
      return "parameter '" + param.name + "' is " + shapeText(g.shape) +
             " in the checkpoint, " + shapeText(param.globalShape) +
             " in this model";
    const Buffer &value = rank.buffers[param.value];
    std::vector<int64_t> where = globalIndices(param, value.shape);
    std::vector<float> local(where.size(), 0.0f);
    for (size_t e = 0; e < where.size(); ++e) {
      if (where[e] < 0)
        continue; // vocabulary padding: zero, as initialized
      if (!g.known[where[e]])
        return "the checkpoint lacks element " + std::to_string(where[e]) +
               " of parameter '" + param.name + "' (a rank's file missing?)";
      local[e] = g.value[where[e]];
    }
    setParameterValues(executor, param, local.data());
    std::vector<float> first, second;
    if (g.moments.empty())
      continue; // weights alone: the moments stay as initialized, zero
    for (const StateSegment &segment : param.state) {
      first.assign(size_t(segment.length), 0.0f);
      second.assign(size_t(segment.length), 0.0f);
      for (int64_t k = 0; k < segment.length; ++k) {
        int64_t at = where[segment.begin + k];
        if (at < 0)
          continue;
        if (!g.moments[at])
          return "the checkpoint lacks the moments of element " +
                 std::to_string(at) + " of parameter '" + param.name + "'";
        first[k] = g.expAvg[at];
        second[k] = g.expAvgSq[at];
      }
      for (auto [buffer, values] :
           {std::pair{rank.expAvg, &first}, std::pair{rank.expAvgSq, &second}})
        device.copyIn(Stream::Compute,
                      static_cast<char *>(executor.address(buffer)) +
                          segment.state * 4,
                      values->data(), size_t(segment.length) * 4);
      // copyIn's host bytes may be reused once it returns.
    }
  }
  device.synchronizeCompute();
  return "";
}

} // namespace strata::runtime
