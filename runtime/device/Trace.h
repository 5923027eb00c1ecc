//===- Trace.h - per-instruction timestamps as a Chrome trace ---*- C++ -*-===//
//
// strata-run --trace FILE keeps when every step (a program run for a
// microbatch) and every instruction began and ended, per rank, and writes
// them in the Chrome trace event format that chrome://tracing and Perfetto
// open: a process per rank with a track for each stream: compute (steps,
// instructions nested in them), communication (gradient reductions,
// parameter gathers) and the four of pipeline exchanges (activations and
// gradients, up and down). One event per line,
// so that strata-inspect can read the steps back without a JSON library.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_DEVICE_TRACE_H
#define STRATA_RUNTIME_DEVICE_TRACE_H

#include <cstdint>
#include <string>
#include <vector>

namespace strata::runtime {

struct TraceEvent {
  std::string name;  // a step: "F3.1" (forward, microbatch 3, chunk 1)
  bool step = false; // a step, or an instruction within one
  double startUs = 0, durationUs = 0; // microseconds since the run's start
  // Steps only:
  std::string phase; // microbatch, forward, backward, optimizer
  int chunk = -1, microbatch = -1;
  int64_t iteration = 0;
  double waitUs = 0; // of the duration, time blocked receiving from a peer
  // Communication only: the track, its stream's number (1 for the
  // collectives', then the four transfer streams).
  int track = 1;
};

/// One rank's events as trace lines (each ends in ",\n"): its compute
/// stream's and its communication and transfer streams'; `label` names the
/// rank.
std::string traceLines(int rank, const std::string &label,
                       const std::vector<TraceEvent> &compute,
                       const std::vector<TraceEvent> &communication);

/// Writes the lines of every rank as one trace file. "" or the error.
std::string writeTrace(const std::string &path,
                       const std::vector<std::string> &rankLines);

/// The step events of a trace this runtime wrote, by rank. "" or the error.
std::string readTraceSteps(const std::string &path,
                           std::vector<std::vector<TraceEvent>> &byRank);

} // namespace strata::runtime

#endif
