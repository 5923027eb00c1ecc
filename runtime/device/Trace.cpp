//===- Trace.cpp - per-instruction timestamps as a Chrome trace -----------===//
#include "runtime/device/Trace.h"
#include "runtime/base/WholeFile.h"
#include "runtime/plan/Plan.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace strata::runtime {

namespace {

std::string number(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%.3f", value);
  return text;
}

/// The text after `"key":` on a line, up to the next ',' or '}' (quotes
/// stripped); "" when the key is absent.
std::string field(const std::string &line, const std::string &key) {
  std::string pattern = "\"" + key + "\":";
  size_t at = line.find(pattern);
  if (at == std::string::npos)
    return "";
  at += pattern.size();
  if (at < line.size() && line[at] == '"') {
    size_t end = line.find('"', at + 1);
    return end == std::string::npos ? "" : line.substr(at + 1, end - at - 1);
  }
  size_t end = line.find_first_of(",}", at);
  return line.substr(at, end == std::string::npos ? end : end - at);
}

} // namespace

std::string traceLines(int rank, const std::string &label,
                       const std::vector<TraceEvent> &compute,
                       const std::vector<TraceEvent> &communication) {
  std::ostringstream out;
  out << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << rank
      << ",\"args\":{\"name\":\"" << label << "\"}},\n";
  out << "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" << rank
      << ",\"args\":{\"sort_index\":" << rank << "}},\n";
  for (int track = 0; track < kStreams; ++track)
    out << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << rank
        << ",\"tid\":" << track << ",\"args\":{\"name\":\"" << streamName(Stream(track))
        << "\"}},\n";
  for (int stream = 0; stream < 2; ++stream)
    for (const TraceEvent &e : stream ? communication : compute) {
      out << "{\"name\":\"" << e.name << "\",\"cat\":\""
          << (e.step   ? "step"
              : stream ? "communication"
                       : "kernel")
          << "\",\"ph\":\"X\",\"pid\":" << rank
          << ",\"tid\":" << (stream ? e.track : 0)
          << ",\"ts\":" << number(e.startUs)
          << ",\"dur\":" << number(e.durationUs);
      if (e.step)
        out << ",\"args\":{\"phase\":\"" << e.phase
            << "\",\"chunk\":" << e.chunk << ",\"microbatch\":" << e.microbatch
            << ",\"iteration\":" << e.iteration
            << ",\"wait\":" << number(e.waitUs) << "}";
      out << "},\n";
    }
  return out.str();
}

std::string writeTrace(const std::string &path,
                       const std::vector<std::string> &rankLines) {
  std::string text = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  for (const std::string &lines : rankLines)
    text += lines;
  // A last event without a comma after it closes the list.
  text += "{\"name\":\"end\",\"ph\":\"i\",\"pid\":0,\"tid\":0,\"ts\":0,"
          "\"s\":\"g\"}\n]}\n";
  return writeFileWhole(path, text);
}

std::string readTraceSteps(const std::string &path,
                           std::vector<std::vector<TraceEvent>> &byRank) {
  if (std::string error = checkReadable(path, kTraceFile); !error.empty())
    return error;
  std::ifstream file(path);
  if (!file)
    return "cannot open trace '" + path + "'";
  std::string line;
  bool any = false;
  while (std::getline(file, line)) {
    if (field(line, "cat") != "step")
      continue;
    TraceEvent e;
    e.step = true;
    e.name = field(line, "name");
    e.phase = field(line, "phase");
    int rank = std::atoi(field(line, "pid").c_str());
    e.startUs = std::atof(field(line, "ts").c_str());
    e.durationUs = std::atof(field(line, "dur").c_str());
    e.chunk = std::atoi(field(line, "chunk").c_str());
    e.microbatch = std::atoi(field(line, "microbatch").c_str());
    e.iteration = std::atoll(field(line, "iteration").c_str());
    e.waitUs = std::atof(field(line, "wait").c_str());
    if (rank < 0 || rank > (1 << 20) || e.phase.empty())
      return "trace '" + path +
             "' has a step event this runtime did not write: " + line;
    if (int(byRank.size()) <= rank)
      byRank.resize(rank + 1);
    byRank[rank].push_back(e);
    any = true;
  }
  if (!any)
    return "trace '" + path +
           "' has no steps (was it written by strata-run --trace?)";
  return "";
}

} // namespace strata::runtime
