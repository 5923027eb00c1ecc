//===- ScheduleDrawing.cpp - a pipeline schedule as text or SVG -----------===//
#include "tools/strata-inspect/ScheduleDrawing.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace strata::inspect {

namespace {

std::string format(const char *pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

/// "bubble 18.8% of compute", and for unit costs the paper's figure.
std::string bubbleLine(const Picture &picture) {
  double bubble = picture.timed.bubbleFraction();
  std::string line = "bubble " + format("%.1f", 100 * bubble) +
                     "% of the busiest stage's compute";
  if (picture.unit.empty()) {
    int p = picture.stages, v = picture.chunksPerStage, m = picture.microbatches;
    line += " (unit costs: a stage's forward 1, backward 2; the paper's "
            "(p-1)/" +
            std::string(v > 1 ? "(v*m)" : "m") + " = " +
            format("%.1f", 100.0 * (p - 1) / (double(v) * m)) + "%)";
  } else {
    line += "; one iteration " + format("%.2f", picture.timed.makespan) +
            " " + picture.unit;
  }
  return line;
}

/// The chunk's index among its stage's chunks: its shade.
int localChunk(const Picture &picture, const sim::Work &work) {
  return work.chunk / picture.stages;
}

} // namespace

std::string drawText(const Picture &picture) {
  // Columns of the shortest duration; a forward reads "F3a" (microbatch 3
  // on the stage's first chunk), a backward "B3a" with a tail of '-' to its
  // length, each ending in '|'; '.' is idle time.
  const sim::SimResult &timed = picture.timed;
  double quantum = 0;
  for (const auto &stage : timed.stages)
    for (const sim::Timed &t : stage)
      if (t.end > t.start)
        quantum = quantum == 0 ? t.end - t.start
                               : std::min(quantum, t.end - t.start);
  if (quantum <= 0)
    quantum = 1;
  size_t label = 2;
  for (const auto &stage : timed.stages)
    for (const sim::Timed &t : stage)
      label = std::max(label, std::to_string(t.work.microbatch).size() + 2 +
                                  (picture.chunksPerStage > 1));
  int columns = int(std::ceil(timed.makespan / quantum - 1e-9));
  std::ostringstream out;
  out << picture.title << "\n" << bubbleLine(picture) << "\n";
  if (picture.chunksPerStage > 1)
    out << "forwards F<microbatch><chunk letter>, backwards "
           "B<microbatch><chunk letter>: a is a stage's first chunk\n";
  for (size_t s = 0; s < timed.stages.size(); ++s) {
    std::string row(size_t(columns) * label, '.');
    for (const sim::Timed &t : timed.stages[s]) {
      size_t begin = size_t(std::llround(t.start / quantum)) * label;
      size_t end = size_t(std::llround(t.end / quantum)) * label;
      end = std::min(end, row.size());
      std::string text =
          (t.work.phase == sim::Phase::Forward ? "F" : "B") +
          std::to_string(t.work.microbatch);
      if (picture.chunksPerStage > 1)
        text += char('a' + localChunk(picture, t.work) % 26);
      for (size_t c = begin; c < end; ++c)
        row[c] = c - begin < text.size() ? text[c - begin]
                 : t.work.phase == sim::Phase::Forward ? ' '
                                                       : '-';
      if (end > begin)
        row[end - 1] = '|';
    }
    out << "stage " << s << (s < 10 ? "  " : " ") << row << "\n";
  }
  return out.str();
}

std::string drawSvg(const Picture &picture) {
  const sim::SimResult &timed = picture.timed;
  // Geometry: the time axis scaled so that the whole iteration is about
  // 1100 pixels wide; a row per stage.
  const double left = 80, top = 70, rowHeight = 34, gap = 8;
  const double width = 1100;
  double scale = timed.makespan > 0 ? width / timed.makespan : 1;
  double height = top + timed.stages.size() * (rowHeight + gap) + 70;
  // Forwards blue and backwards green, darker for a stage's first chunk.
  const char *forward[] = {"#1f5fa8", "#7fb0e6", "#b9d4f2", "#dce9f8"};
  const char *backward[] = {"#2e8b3e", "#8fd19a", "#c3e8c8", "#e1f4e4"};
  std::ostringstream out;
  out << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\""
      << int(left + width + 40) << "\" height=\"" << int(height)
      << "\" font-family=\"Helvetica, Arial, sans-serif\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"" << left << "\" y=\"28\" font-size=\"18\">"
      << picture.title << "</text>\n"
      << "<text x=\"" << left << "\" y=\"50\" font-size=\"13\" fill=\"#444\">"
      << bubbleLine(picture) << "</text>\n";
  for (size_t s = 0; s < timed.stages.size(); ++s) {
    double y = top + s * (rowHeight + gap);
    out << "<text x=\"" << left - 10 << "\" y=\"" << y + rowHeight * 0.65
        << "\" font-size=\"14\" text-anchor=\"end\">stage " << s
        << "</text>\n"
        << "<rect x=\"" << left << "\" y=\"" << y << "\" width=\"" << width
        << "\" height=\"" << rowHeight
        << "\" fill=\"#f4f4f4\" stroke=\"#ccc\"/>\n";
    for (const sim::Timed &t : timed.stages[s]) {
      bool isForward = t.work.phase == sim::Phase::Forward;
      int shade = std::min(localChunk(picture, t.work), 3);
      double x = left + t.start * scale, w = (t.end - t.start) * scale;
      out << "<rect class=\"" << (isForward ? "forward" : "backward")
          << "\" x=\"" << format("%.2f", x) << "\" y=\"" << y << "\" width=\""
          << format("%.2f", w) << "\" height=\"" << rowHeight << "\" fill=\""
          << (isForward ? forward[shade] : backward[shade])
          << "\" stroke=\"#333\" stroke-width=\"0.8\"><title>"
          << sim::describe(t.work) << "</title></rect>\n";
      if (w >= 9)
        out << "<text x=\"" << format("%.2f", x + w / 2) << "\" y=\""
            << y + rowHeight * 0.66 << "\" font-size=\""
            << (w >= 18 ? 14 : 10) << "\" text-anchor=\"middle\" fill=\""
            << (shade == 0 ? "white" : "black") << "\">"
            << t.work.microbatch << "</text>\n";
    }
  }
  // Legend: one swatch per chunk shade, forward and backward.
  double y = top + timed.stages.size() * (rowHeight + gap) + 20;
  double x = left;
  for (int j = 0; j < std::min(picture.chunksPerStage, 4); ++j)
    for (bool isForward : {true, false}) {
      out << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"18\" "
          << "height=\"14\" fill=\"" << (isForward ? forward[j] : backward[j])
          << "\" stroke=\"#333\" stroke-width=\"0.8\"/>\n"
          << "<text x=\"" << x + 24 << "\" y=\"" << y + 12
          << "\" font-size=\"12\">" << (isForward ? "forward" : "backward")
          << (picture.chunksPerStage > 1
                  ? " (the stage's chunk " + std::to_string(j) + ")"
                  : std::string())
          << "</text>\n";
      x += picture.chunksPerStage > 1 ? 235 : 110;
    }
  out << "<text x=\"" << left << "\" y=\"" << y + 36
      << "\" font-size=\"12\" fill=\"#444\">numbers are microbatches; time "
      << "runs right" << (picture.unit.empty() ? " (unit costs)" : " (measured)")
      << "; empty space is the pipeline bubble</text>\n";
  out << "</svg>\n";
  return out.str();
}

} // namespace strata::inspect
