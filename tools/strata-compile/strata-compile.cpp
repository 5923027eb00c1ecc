//===- strata-compile.cpp - model file to training plan -------------------===//
//
//   strata-compile MODEL [--set NAME=VALUE]... [--emit=graph|summary] [-o OUT]
//
//===----------------------------------------------------------------------===//
#include "compiler/ModelStats.h"
#include "compiler/Registration.h"
#include "frontend/Frontend.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;
using namespace strata;

namespace {

enum class Emit { Graph, Summary };

cl::OptionCategory category("strata-compile options");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model file>"),
                               cl::Required, cl::cat(category));

cl::opt<std::string> outputFile("o", cl::desc("Output file (default: stdout)"),
                                cl::value_desc("file"), cl::init("-"),
                                cl::cat(category));

cl::opt<Emit> emit(
    "emit", cl::desc("What to write"), cl::init(Emit::Summary),
    cl::values(clEnumValN(Emit::Graph, "graph",
                          "the graph IR: single-device meaning, global "
                          "shapes, locations into the model file"),
               clEnumValN(Emit::Summary, "summary",
                          "parameters, layers and FLOPs per training step")),
    cl::cat(category));

cl::list<std::string> sets("set",
                           cl::desc("Override a constant the model declares"),
                           cl::value_desc("NAME=VALUE"), cl::cat(category));

cl::opt<int64_t> microBatchSize(
    "micro-batch-size",
    cl::desc("Sequences per microbatch: the model's 'batch' (default 1)"),
    cl::init(1), cl::cat(category));

int fail(const Twine &message) {
  WithColor::error(errs(), "strata-compile") << message << "\n";
  return 1;
}

std::string describeStats(const ModelStats &stats, const char *prefix) {
  return formatv("{0}model {1}: {2} layers, {3} parameters\n"
                 "{0}{4} FLOPs per training step ({5:e2}; {6} tokens; matmul "
                 "and attention, forward and backward)\n",
                 prefix, stats.name, stats.layers,
                 withThousands(stats.parameters),
                 withThousands(stats.stepFlops()), double(stats.stepFlops()),
                 withThousands(stats.tokens))
      .str();
}

} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "strata-compile: a model file to a training "
                              "plan\n");

  std::vector<frontend::ConstOverride> overrides;
  if (microBatchSize < 1)
    return fail("--micro-batch-size must be at least 1, got " +
                Twine(microBatchSize.getValue()));
  overrides.push_back({"batch", std::to_string(microBatchSize)});
  for (const std::string &text : sets) {
    frontend::ConstOverride override;
    if (!frontend::parseOverride(text, override))
      return fail("--set " + text +
                  ": expected NAME=VALUE, as in --set "
                  "hidden=64");
    overrides.push_back(override);
  }

  auto buffer = MemoryBuffer::getFileOrSTDIN(inputFile, /*IsText=*/true);
  if (std::error_code error = buffer.getError())
    return fail("cannot open model file '" + inputFile +
                "': " + error.message());

  mlir::DialectRegistry registry;
  registerDialects(registry);
  mlir::MLIRContext context(registry);
  SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(*buffer), SMLoc());
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);

  mlir::OwningOpRef<mlir::ModuleOp> module =
      frontend::buildModel(context, sourceMgr, overrides,
                           [](const Twine &message) { fail(message); });
  if (!module)
    return 1;

  std::string errorMessage;
  auto output = mlir::openOutputFile(outputFile, &errorMessage);
  if (!output)
    return fail("cannot write '" + outputFile + "': " + errorMessage);
  ModelStats stats = computeModelStats(*module);
  raw_ostream &os = output->os();
  switch (emit) {
  case Emit::Summary:
    os << describeStats(stats, "");
    break;
  case Emit::Graph:
    os << describeStats(stats, "// ");
    // Locations inline (local scope: no #loc aliases), so the printed IR
    // reads line by line against the model file and parses back.
    module->print(os, mlir::OpPrintingFlags()
                          .enableDebugInfo(/*enable=*/true,
                                           /*prettyForm=*/false)
                          .useLocalScope());
    os << "\n";
    break;
  }
  output->keep();
  return 0;
}
