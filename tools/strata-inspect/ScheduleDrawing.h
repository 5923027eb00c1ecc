//===- ScheduleDrawing.h - a pipeline schedule as text or SVG ---*- C++ -*-===//
//
// Draws a timed schedule as the paper's figures do: one row per pipeline
// stage, one box per forward or backward with its microbatch number, the
// chunks of a stage in shades of one colour (forwards blue, backwards
// green), idle time left empty so that the bubble shows.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_TOOLS_STRATA_INSPECT_SCHEDULEDRAWING_H
#define STRATA_TOOLS_STRATA_INSPECT_SCHEDULEDRAWING_H

#include "runtime/schedule/PipelineSim.h"

#include <string>

namespace strata::inspect {

struct Picture {
  sim::SimResult timed;
  int stages = 1, chunksPerStage = 1, microbatches = 1;
  std::string title; // "interleaved 1F1B, p = 4, v = 2, m = 8"
  std::string unit;  // "" for unit costs, else "ms" (measured)
};

/// A terminal drawing: a row of boxes per stage, time running right.
std::string drawText(const Picture &picture);

/// An SVG document of the same.
std::string drawSvg(const Picture &picture);

} // namespace strata::inspect

#endif
