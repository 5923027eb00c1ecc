//===- MegatronFlags.h - Megatron-LM's flags, and where strata has them -*- C++
//-*-===//
//
// A Megatron-LM user types Megatron's flags. strata splits its launcher in
// two (strata-compile for the model and layout, strata-run for the
// training run), writes the model's shape in the model file, and leaves
// some features out. For a flag one tool does not know, this table says
// where it belongs or why strata has no such thing, by name, instead of
// LLVM's "did you mean '-o'?" or "unknown flag".
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_TOOLS_COMMON_MEGATRONFLAGS_H
#define STRATA_TOOLS_COMMON_MEGATRONFLAGS_H

#include <string>
#include <string_view>

namespace strata::tools {

enum class StrataTool { Compile, Run };

/// For `flag` (with its dashes, without "=value") that `tool` does not
/// take: what to type instead, or why strata has none, as a sentence
/// naming the flag; "" when it is no Megatron flag strata knows of.
std::string explainMegatronFlag(std::string_view flag, StrataTool tool);

} // namespace strata::tools

#endif
