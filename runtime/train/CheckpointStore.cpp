//===- CheckpointStore.cpp - checkpoints on disk, whole or not at all -----===//
#include "runtime/train/CheckpointStore.h"
#include "runtime/base/JsonReader.h"
#include "runtime/base/WholeFile.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include <fcntl.h>
#include <stdio.h> // renameat2

namespace strata::runtime {

namespace fs = std::filesystem;

namespace {

constexpr const char *kMarker = "latest_checkpointed_iteration.txt";
constexpr const char *kFormat = "strata checkpoint";
constexpr int64_t kVersion = 2; // 2: the model's GELU

std::string rankFile(const std::string &directory, uint32_t rank) {
  char name[64];
  std::snprintf(name, sizeof name, "/rank_%05u.safetensors", rank);
  return directory + name;
}

/// FNV-1a over the tensors' names and bytes, in the file's order, and the
/// metadata that places them (all but the checksum itself).
std::string checksum(const std::map<std::string, HostTensor> &tensors,
                     const std::map<std::string, std::string> &metadata) {
  uint64_t hash = 1469598103934665603ull;
  auto mix = [&](const void *data, size_t bytes) {
    const auto *p = static_cast<const uint8_t *>(data);
    for (size_t i = 0; i < bytes; ++i)
      hash = (hash ^ p[i]) * 1099511628211ull;
  };
  for (const auto &[name, tensor] : tensors) {
    mix(name.data(), name.size() + 1);
    mix(tensor.shape.data(), tensor.shape.size() * 8);
    mix(tensor.values.data(), tensor.values.size() * 4);
  }
  for (const auto &[key, value] : metadata)
    if (key != "strata.checksum") {
      mix(key.data(), key.size());
      mix(value.data(), value.size() + 1); // with its terminator
    }
  char text[32];
  std::snprintf(text, sizeof text, "%016llx", (unsigned long long)hash);
  return text;
}

std::string layoutOf(const Plan &plan) {
  return "t" + std::to_string(plan.tensorParallel) + " d" +
         std::to_string(plan.dataParallel) + " p" +
         std::to_string(plan.pipelineParallel) +
         (plan.contextParallel > 1 ? " c" + std::to_string(plan.contextParallel)
                                   : "") +
         (plan.pipelineSchedule.empty() ? "" : " " + plan.pipelineSchedule);
}

/// Rank 0's part: metadata, the rename into place, then the marker.
std::string publish(const Plan &plan, const std::string &root,
                    const std::string &temp, const std::string &directory,
                    int64_t iteration, uint64_t seed, int64_t skipped) {
  std::string json =
      jsonObject({{"format", jsonString(kFormat)},
                  {"version", std::to_string(kVersion)},
                  {"model", jsonString(plan.model)},
                  {"gelu", jsonString(plan.gelu)},
                  {"iteration", std::to_string(iteration)},
                  {"consumed_samples",
                   std::to_string(uint64_t(iteration) * plan.globalBatchSize)},
                  {"global_batch_size", std::to_string(plan.globalBatchSize)},
                  {"seed", std::to_string(seed)},
                  {"skipped_iterations", std::to_string(skipped)},
                  {"ranks", std::to_string(plan.world())},
                  {"layout", jsonString(layoutOf(plan))}});
  if (std::string error = writeFileWhole(temp + "/metadata.json", json);
      !error.empty())
    return error;
  // Into place: a checkpoint of the same iteration already there (a run
  // resumed before it) is exchanged with the new one in one step, so the
  // name never lacks a complete checkpoint, then removed.
  std::error_code ec;
  bool replacing = fs::exists(directory, ec);
  if (replacing ? ::renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD,
                              directory.c_str(), RENAME_EXCHANGE) != 0
                : ::rename(temp.c_str(), directory.c_str()) != 0)
    return "cannot rename '" + temp + "' to '" + directory +
           "': " + std::strerror(errno);
  syncDirectory(root);
  if (replacing)
    fs::remove_all(temp, ec);
  return writeFileWhole(root + "/" + kMarker, std::to_string(iteration) + "\n");
}

} // namespace

std::string checkpointDirectory(const std::string &root, int64_t iteration) {
  char name[32];
  std::snprintf(name, sizeof name, "/iter_%07lld", (long long)iteration);
  return root + name;
}

std::string saveCheckpoint(Executor &executor, const std::string &root,
                           int64_t iteration, uint64_t seed, int64_t skipped) {
  const Plan &plan = executor.plan();
  uint32_t me = executor.rankPlan().rank;
  std::vector<int> everyone;
  for (uint32_t r = 0; r < plan.world(); ++r)
    everyone.push_back(int(r));
  // Every rank learns whether any failed, so that none goes on alone.
  auto agree = [&](const std::string &error, const char *step) {
    float failed = error.empty() ? 0.0f : 1.0f;
    executor.communication().hostAllReduce(
        everyone, &failed, 1,
        "saving the checkpoint of iteration " + std::to_string(iteration) +
            " (" + step + ")");
    return failed == 0.0f;
  };
  std::string directory = checkpointDirectory(root, iteration);
  std::string temp = directory + ".tmp";
  std::string error;
  if (me == 0) {
    std::error_code ec;
    fs::create_directories(root, ec);
    if (!ec)
      fs::remove_all(temp, ec); // a save that did not finish
    if (!ec)
      fs::create_directory(temp, ec);
    if (ec)
      error = "cannot make '" + temp + "': " + ec.message();
  }
  if (!agree(error, "preparing"))
    return error.empty() ? "rank 0 could not prepare '" + temp + "'" : error;
  RankShards shards = shardsOf(executor);
  shards.metadata["strata.rank"] = std::to_string(me);
  shards.metadata["strata.checksum"] =
      checksum(shards.tensors, shards.metadata);
  error = writeSafetensors(rankFile(temp, me), shards.tensors, shards.metadata);
  if (!agree(error, "writing the shards"))
    return error.empty() ? "another rank could not write its shards" : error;
  if (me == 0)
    error = publish(plan, root, temp, directory, iteration, seed, skipped);
  if (!agree(error, "publishing"))
    return error.empty() ? "rank 0 could not publish the checkpoint" : error;
  return "";
}

namespace {

/// The checkpoint the marker names, checked against `plan` and `seed`
/// when there is a plan (else every parameter is read).
std::string readFiles(const std::string &root, const Plan *plan, uint64_t seed,
                      LoadedCheckpoint &out, bool &found) {
  out = {};
  found = false;
  std::string marker = root + "/" + kMarker;
  std::error_code ec;
  if (!fs::exists(marker, ec))
    return "";
  found = true;
  std::string text;
  if (std::string error = readFileWhole(marker, text, kJsonFile);
      !error.empty())
    return error;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  if (text.empty() || text.size() > 12 ||
      text.find_first_not_of("0123456789") != std::string::npos)
    return "'" + marker + "' holds '" + text + "', not an iteration";
  int64_t iteration = std::stoll(text);
  out.directory = checkpointDirectory(root, iteration);
  out.iteration = iteration;

  std::string metaPath = out.directory + "/metadata.json", json;
  if (!readFileWhole(metaPath, json, kJsonFile).empty())
    return "'" + metaPath + "' is missing: '" + marker + "' names iteration " +
           text + ", whose checkpoint is not there";
  std::map<std::string, std::string> strings;
  std::map<std::string, int64_t> numbers;
  JsonReader reader(json);
  bool ok = reader.eat('{');
  if (ok && !reader.eat('}')) {
    do {
      std::string key, value;
      int64_t number = 0;
      ok = reader.string(key) && reader.eat(':');
      if (ok && reader.string(value))
        strings[key] = value;
      else if (ok && reader.unsignedInteger(number))
        numbers[key] = number;
      else
        ok = false;
    } while (ok && reader.eat(','));
    ok = ok && reader.eat('}');
  }
  ok = ok && reader.done();
  // The version first: an older checkpoint lacks keys this one has.
  if (!ok || strings["format"] != kFormat || !numbers.count("version"))
    return "'" + metaPath + "' is not a strata checkpoint's metadata";
  if (numbers["version"] != kVersion)
    return "'" + metaPath + "' is version " +
           std::to_string(numbers["version"]) + "; this strata reads " +
           std::to_string(kVersion);
  for (const char *key : {"model", "gelu", "layout"})
    ok = ok && strings.count(key);
  for (const char *key :
       {"iteration", "consumed_samples", "global_batch_size", "seed", "ranks"})
    ok = ok && numbers.count(key);
  if (!ok)
    return "'" + metaPath + "' is not a strata checkpoint's metadata";
  if (numbers.count("skipped_iterations") &&
      numbers["skipped_iterations"] > iteration)
    return "'" + metaPath + "' counts more skipped iterations than " + text;
  out.skippedIterations =
      numbers.count("skipped_iterations") ? numbers["skipped_iterations"] : 0;
  if (numbers["iteration"] != iteration)
    return "'" + metaPath + "' is of iteration " +
           std::to_string(numbers["iteration"]) + ", not " + text;
  if (numbers["consumed_samples"] != iteration * numbers["global_batch_size"])
    return "'" + metaPath +
           "': " + std::to_string(numbers["consumed_samples"]) +
           " consumed samples are not " + text + " iterations of " +
           std::to_string(numbers["global_batch_size"]);
  if (plan && strings["model"] != plan->model)
    return "'" + out.directory + "' is a checkpoint of model '" +
           strings["model"] + "', not '" + plan->model + "'";
  if (plan && strings["gelu"] != plan->gelu)
    return "'" + out.directory + "' was trained with " +
           describeGelu(strings["gelu"]) + "; this plan's model computes " +
           describeGelu(plan->gelu);
  if (plan && numbers["global_batch_size"] != int64_t(plan->globalBatchSize))
    return "'" + out.directory + "' was trained with a global batch of " +
           std::to_string(numbers["global_batch_size"]) +
           " samples; this plan's is " + std::to_string(plan->globalBatchSize) +
           " (the data position would not carry over)";
  if (plan && uint64_t(numbers["seed"]) != seed)
    return "'" + out.directory + "' was trained with --seed " +
           std::to_string(numbers["seed"]) + "; this run has " +
           std::to_string(seed) + " (the data order would change)";
  if (numbers["ranks"] < 1 || numbers["ranks"] > kMaxWorldSize)
    return "'" + metaPath + "' names " + std::to_string(numbers["ranks"]) +
           " ranks";
  out.savedRanks = uint32_t(numbers["ranks"]);
  out.savedLayout = strings["layout"];

  out.model = strings["model"];
  out.gelu = strings["gelu"];
  // With a plan, only the parameters this process's ranks hold are
  // assembled, each checked against the model's global shape before
  // anything is sized; without, every one, none larger than the files.
  std::map<std::string, std::vector<int64_t>> wanted;
  if (plan)
    wanted = plan->paramShapes();
  int64_t fileElements = 0;
  for (uint32_t r = 0; r < out.savedRanks; ++r) {
    std::string path = rankFile(out.directory, r);
    if (!fs::exists(path, ec))
      return "'" + path + "' is missing: the checkpoint was saved by " +
             std::to_string(out.savedRanks) + " ranks";
    fileElements += int64_t(fs::file_size(path, ec) / 4);
  }
  std::set<std::string> saved;
  for (uint32_t r = 0; r < out.savedRanks; ++r) {
    std::string path = rankFile(out.directory, r);
    RankShards shards;
    if (std::string error =
            readSafetensors(path, shards.tensors, &shards.metadata);
        !error.empty())
      return error;
    if (shards.metadata["strata.checksum"] !=
        checksum(shards.tensors, shards.metadata))
      return "'" + path +
             "' is damaged: its tensors or metadata do not match its checksum";
    if (shards.metadata["strata.rank"] != std::to_string(r))
      return "'" + path + "' is not rank " + std::to_string(r) + "'s file";
    if (std::string error = addShards(shards, plan ? &wanted : nullptr,
                                      fileElements, out.params);
        !error.empty())
      return "'" + path + "': " + error;
    for (const auto &[key, value] : shards.metadata)
      if (key.rfind("strata.", 0) != 0)
        saved.insert(key);
  }
  // With every rank decoded, the model's parameters are known: the
  // checkpoint must hold no other.
  if (plan && plan->ranks.size() == plan->world())
    for (const std::string &name : saved)
      if (!wanted.count(name))
        return "'" + out.directory + "' holds parameter '" + name +
               "', which model '" + plan->model + "' does not have";
  return "";
}

} // namespace

std::string readCheckpoint(const std::string &root, const Plan &plan,
                           uint64_t seed, LoadedCheckpoint &out, bool &found) {
  return readFiles(root, &plan, seed, out, found);
}

std::string readCheckpointParams(const std::string &root, LoadedCheckpoint &out,
                                 std::map<std::string, HostTensor> &params) {
  bool found = false;
  if (std::string error = readFiles(root, nullptr, 0, out, found);
      !error.empty())
    return error;
  if (!found)
    return "no checkpoint in '" + root +
           "' (no latest_checkpointed_iteration.txt)";
  params.clear();
  for (auto &[name, param] : out.params) {
    for (size_t i = 0; i < param.known.size(); ++i)
      if (!param.known[i])
        return "'" + out.directory + "' lacks element " + std::to_string(i) +
               " of parameter '" + name + "'";
    params[name] = {param.shape, std::move(param.value)};
  }
  out.params.clear();
  return "";
}

} // namespace strata::runtime
