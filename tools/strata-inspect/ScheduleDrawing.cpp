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

/// Whether the picture's backwards are cut in two (B and W).
bool cut(const Picture &picture) {
  for (const auto &stage : picture.timed.stages)
    for (const sim::Timed &t : stage)
      if (t.work.phase == sim::Phase::Weight)
        return true;
  return false;
}

/// "bubble 18.8% of compute", and for unit costs the paper's figure.
std::string bubbleLine(const Picture &picture) {
  double bubble = picture.timed.bubbleFraction();
  std::string line = "bubble " + format("%.1f", 100 * bubble) +
                     "% of the busiest stage's compute";
  int p = picture.stages, v = picture.chunksPerStage, m = picture.microbatches;
  if (picture.unit.empty() && cut(picture)) {
    // An iteration waits for every stage, so the last one's late start,
    // (p-1) forwards, is the least bubble any order can have.
    line += " (unit costs: a stage's forward, B and W 1 each; the least "
            "any order can have, (p-1)/(3*v*m) = " +
            format("%.1f", 100.0 * (p - 1) / (3.0 * v * m)) + "%)";
  } else if (picture.unit.empty()) {
    line += " (unit costs: a stage's forward 1, backward 2; the paper's "
            "(p-1)/" +
            std::string(v > 1 ? "(v*m)" : "m") + " = " +
            format("%.1f", 100.0 * (p - 1) / (double(v) * m)) + "%)";
  } else {
    line += "; one iteration " + format("%.2f", picture.timed.makespan) + " " +
            picture.unit;
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
  // length, a weights' gradient "W3a" with '=', each ending in '|'; '.' is
  // idle time.
  const sim::SimResult &timed = picture.timed;
  double quantum = 0;
  for (const auto &stage : timed.stages)
    for (const sim::Timed &t : stage)
      if (t.end > t.start)
        quantum =
            quantum == 0 ? t.end - t.start : std::min(quantum, t.end - t.start);
  // A step that does next to nothing (the first chunk's B only receives)
  // must not stretch a measured picture to thousands of columns.
  quantum = std::max(quantum, timed.makespan / 240);
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
          sim::letter(t.work.phase) + std::to_string(t.work.microbatch);
      if (picture.chunksPerStage > 1)
        text += char('a' + localChunk(picture, t.work) % 26);
      char tail = t.work.phase == sim::Phase::Forward    ? ' '
                  : t.work.phase == sim::Phase::Backward ? '-'
                                                         : '=';
      for (size_t c = begin; c < end; ++c)
        row[c] = c - begin < text.size() ? text[c - begin] : tail;
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
  // Forwards blue, backwards (B) green and weights' gradients (W)
  // orange, darker for a stage's first chunk.
  const char *forward[] = {"#1f5fa8", "#7fb0e6", "#b9d4f2", "#dce9f8"};
  const char *backward[] = {"#2e8b3e", "#8fd19a", "#c3e8c8", "#e1f4e4"};
  const char *weight[] = {"#c2620a", "#f0a860", "#f7cd9f", "#fbe6cf"};
  auto fill = [&](sim::Phase phase, int shade) {
    return phase == sim::Phase::Forward    ? forward[shade]
           : phase == sim::Phase::Backward ? backward[shade]
                                           : weight[shade];
  };
  auto className = [](sim::Phase phase) {
    return phase == sim::Phase::Forward    ? "forward"
           : phase == sim::Phase::Backward ? "backward"
                                           : "weight";
  };
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
        << "\" font-size=\"14\" text-anchor=\"end\">stage " << s << "</text>\n"
        << "<rect x=\"" << left << "\" y=\"" << y << "\" width=\"" << width
        << "\" height=\"" << rowHeight
        << "\" fill=\"#f4f4f4\" stroke=\"#ccc\"/>\n";
    for (const sim::Timed &t : timed.stages[s]) {
      int shade = std::min(localChunk(picture, t.work), 3);
      double x = left + t.start * scale, w = (t.end - t.start) * scale;
      out << "<rect class=\"" << className(t.work.phase) << "\" x=\""
          << format("%.2f", x) << "\" y=\"" << y << "\" width=\""
          << format("%.2f", w) << "\" height=\"" << rowHeight << "\" fill=\""
          << fill(t.work.phase, shade)
          << "\" stroke=\"#333\" stroke-width=\"0.8\"><title>"
          << sim::describe(t.work) << "</title></rect>\n";
      if (w >= 9)
        out << "<text x=\"" << format("%.2f", x + w / 2) << "\" y=\""
            << y + rowHeight * 0.66 << "\" font-size=\"" << (w >= 18 ? 14 : 10)
            << "\" text-anchor=\"middle\" fill=\""
            << (shade == 0 ? "white" : "black") << "\">" << t.work.microbatch
            << "</text>\n";
    }
  }
  // Legend: one swatch per chunk shade, forward and backward (and W).
  double y = top + timed.stages.size() * (rowHeight + gap) + 20;
  double x = left;
  std::vector<sim::Phase> phases = {sim::Phase::Forward, sim::Phase::Backward};
  if (cut(picture))
    phases.push_back(sim::Phase::Weight);
  for (int j = 0; j < std::min(picture.chunksPerStage, 4); ++j)
    for (sim::Phase phase : phases) {
      out << "<rect x=\"" << x << "\" y=\"" << y << "\" width=\"18\" "
          << "height=\"14\" fill=\"" << fill(phase, j)
          << "\" stroke=\"#333\" stroke-width=\"0.8\"/>\n"
          << "<text x=\"" << x + 24 << "\" y=\"" << y + 12
          << "\" font-size=\"12\">"
          << (phase == sim::Phase::Forward ? "forward"
              : phase == sim::Phase::Backward
                  ? (phases.size() > 2 ? "backward B (input)" : "backward")
                  : "W (weights)")
          << (picture.chunksPerStage > 1
                  ? " (the stage's chunk " + std::to_string(j) + ")"
                  : std::string())
          << "</text>\n";
      x += (picture.chunksPerStage > 1 ? 235 : 110) +
           (phases.size() > 2 ? 40 : 0);
    }
  out << "<text x=\"" << left << "\" y=\"" << y + 36
      << "\" font-size=\"12\" fill=\"#444\">numbers are microbatches; time "
      << "runs right"
      << (picture.unit.empty() ? " (unit costs)" : " (measured)")
      << "; empty space is the pipeline bubble</text>\n";
  out << "</svg>\n";
  return out.str();
}

} // namespace strata::inspect
