//===- CudaSources.cpp - the kernels' CUDA files, as the units hold them --===//
#include "compiler/codegen/CudaSources.h"

#include <cstring>

namespace strata::codegen {

/// A file of compiler/codegen/cuda/ (CudaSourcesText.cpp, made by the
/// build from the files).
struct CudaSourceFile {
  const char *name, *text;
};
extern const CudaSourceFile kCudaSourceFiles[];
extern const unsigned kCudaSourceFileCount;

const char *cudaSourceFile(std::string_view file) {
  for (unsigned i = 0; i < kCudaSourceFileCount; ++i)
    if (file == kCudaSourceFiles[i].name)
      return kCudaSourceFiles[i].text;
  return nullptr;
}

std::vector<std::string> cudaSourceNames() {
  std::vector<std::string> names;
  for (unsigned i = 0; i < kCudaSourceFileCount; ++i)
    names.push_back(kCudaSourceFiles[i].name);
  return names;
}

namespace {

/// `line` is `#include "NAME"`: NAME, else "".
std::string includedName(std::string_view line) {
  constexpr std::string_view kInclude = "#include \"";
  if (line.substr(0, kInclude.size()) != kInclude)
    return "";
  size_t end = line.find('"', kInclude.size());
  return end == std::string_view::npos
             ? ""
             : std::string(line.substr(kInclude.size(), end - kInclude.size()));
}

void expand(const std::string &file, std::set<std::string> &included,
            std::string &out) {
  if (!included.insert(file).second)
    return;
  const char *text = cudaSourceFile(file);
  if (!text) {
    out += "#error \"" + file + " is not among the built-in CUDA files\"\n";
    return;
  }
  // Where the file begins: a plan writes each file's text once
  // (compiler/plan/PlanWriter.cpp splits a unit before such lines).
  out += "// ---- compiler/codegen/cuda/" + file + " ----\n";
  std::string_view rest(text);
  while (!rest.empty()) {
    size_t end = rest.find('\n');
    std::string_view line =
        rest.substr(0, end == std::string_view::npos ? rest.size() : end + 1);
    rest.remove_prefix(line.size());
    if (line.substr(0, 12) == "#pragma once")
      continue;
    if (std::string name = includedName(line); !name.empty()) {
      expand(name, included, out);
      continue;
    }
    out += line;
  }
  if (!out.empty() && out.back() != '\n')
    out += '\n';
}

} // namespace

std::string expandCudaSources(const std::vector<std::string> &files,
                              std::set<std::string> &included) {
  std::string out;
  for (const std::string &file : files)
    expand(file, included, out);
  return out;
}

} // namespace strata::codegen
