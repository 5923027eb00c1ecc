//===- MegatronFlags.cpp - Megatron-LM's flags, and where strata has them -===//
#include "tools/common/MegatronFlags.h"

#include <array>

namespace strata::tools {
namespace {

enum class Where { Compile, Run, Model, Data, Absent };

struct MegatronFlag {
  const char *flag;
  Where where;
  const char *note; // what to type (Model), or why not (Absent); may be ""
};

// Megatron-LM's flags (megatron/training/arguments.py) that a user of
// strata types, by where strata has them.
constexpr std::array kFlags = {
    // The layout, the batch and the model's precision: strata-compile.
    MegatronFlag{"--micro-batch-size", Where::Compile, ""},
    MegatronFlag{"--global-batch-size", Where::Compile, ""},
    MegatronFlag{"--tensor-model-parallel-size", Where::Compile, ""},
    MegatronFlag{"--pipeline-model-parallel-size", Where::Compile, ""},
    MegatronFlag{"--data-parallel-size", Where::Compile, ""},
    MegatronFlag{"--context-parallel-size", Where::Compile, ""},
    MegatronFlag{"--cp-comm-type", Where::Compile, ""},
    MegatronFlag{"--num-layers-per-virtual-pipeline-stage", Where::Compile, ""},
    MegatronFlag{"--decoder-first-pipeline-num-layers", Where::Compile, ""},
    MegatronFlag{"--decoder-last-pipeline-num-layers", Where::Compile, ""},
    MegatronFlag{"--sequence-parallel", Where::Compile, ""},
    MegatronFlag{"--use-distributed-optimizer", Where::Compile, ""},
    MegatronFlag{"--recompute-granularity", Where::Compile, ""},
    MegatronFlag{"--recompute-activations", Where::Compile, ""},
    MegatronFlag{"--recompute-method", Where::Compile, ""},
    MegatronFlag{"--recompute-num-layers", Where::Compile, ""},
    MegatronFlag{"--make-vocab-size-divisible-by", Where::Compile, ""},
    MegatronFlag{"--ddp-bucket-size", Where::Compile, ""},
    MegatronFlag{"--overlap-grad-reduce", Where::Compile, ""},
    MegatronFlag{"--overlap-param-gather", Where::Compile, ""},
    MegatronFlag{"--bf16", Where::Compile, ""},
    // The training run: strata-run.
    MegatronFlag{"--train-iters", Where::Run, ""},
    MegatronFlag{"--seed", Where::Run, ""},
    MegatronFlag{"--lr", Where::Run, ""},
    MegatronFlag{"--min-lr", Where::Run, ""},
    MegatronFlag{"--lr-warmup-iters", Where::Run, ""},
    MegatronFlag{"--lr-decay-iters", Where::Run, ""},
    MegatronFlag{"--lr-decay-style", Where::Run, ""},
    MegatronFlag{"--weight-decay", Where::Run, ""},
    MegatronFlag{"--adam-beta1", Where::Run, ""},
    MegatronFlag{"--adam-beta2", Where::Run, ""},
    MegatronFlag{"--adam-eps", Where::Run, ""},
    MegatronFlag{"--clip-grad", Where::Run, ""},
    MegatronFlag{"--data-path", Where::Run, ""},
    MegatronFlag{"--split", Where::Run, ""},
    MegatronFlag{"--eval-interval", Where::Run, ""},
    MegatronFlag{"--eval-iters", Where::Run, ""},
    MegatronFlag{"--save", Where::Run, ""},
    MegatronFlag{"--load", Where::Run, ""},
    MegatronFlag{"--save-interval", Where::Run, ""},
    MegatronFlag{"--exit-interval", Where::Run, ""},
    MegatronFlag{"--log-interval", Where::Run, ""},
    MegatronFlag{"--check-for-nan-in-loss-and-grad", Where::Run, ""},
    MegatronFlag{"--distributed-timeout-minutes", Where::Run,
                 "--comm-timeout SECONDS"},
    // The model's shape: the model file, or --set on strata-compile.
    MegatronFlag{"--num-layers", Where::Model, "--set layers=N"},
    MegatronFlag{"--hidden-size", Where::Model, "--set hidden=N"},
    MegatronFlag{"--num-attention-heads", Where::Model, "--set heads=N"},
    MegatronFlag{"--seq-length", Where::Model, "--set seq=N"},
    MegatronFlag{"--max-position-embeddings", Where::Model, "--set seq=N"},
    MegatronFlag{"--ffn-hidden-size", Where::Model, "--set ffn=N"},
    MegatronFlag{"--init-method-std", Where::Model, "--set std=X"},
    MegatronFlag{
        "--hidden-dropout", Where::Model,
        "dropout(x, rate=...), --set hidden_dropout=X in the examples"},
    MegatronFlag{"--attention-dropout", Where::Model,
                 "attention(..., dropout=...), --set attention_dropout=X in "
                 "the examples"},
    MegatronFlag{"--swiglu", Where::Model, "silu(...) * ... in the model file"},
    MegatronFlag{"--normalization", Where::Model,
                 "layer_norm or rms_norm in the model file"},
    MegatronFlag{"--position-embedding-type", Where::Model,
                 "a learned table or rope(...) in the model file"},
    MegatronFlag{"--untie-embeddings-and-output-weights", Where::Model,
                 "an output parameter of its own in the model file"},
    MegatronFlag{"--disable-bias-linear", Where::Model,
                 "linears without a bias in the model file"},
    MegatronFlag{"--openai-gelu", Where::Model, "gelu(x, tanh=true)"},
    MegatronFlag{"--group-query-attention", Where::Model,
                 "fewer key and value heads in the model file"},
    // The data: strata-data preprocess.
    MegatronFlag{"--tokenizer-type", Where::Data, ""},
    MegatronFlag{"--vocab-file", Where::Data, ""},
    MegatronFlag{"--merge-file", Where::Data, ""},
    MegatronFlag{"--json-keys", Where::Data, ""},
    MegatronFlag{"--append-eod", Where::Data, ""},
    // What strata does not have.
    MegatronFlag{"--fp16", Where::Absent,
                 "strata trains in fp32 or bf16 (--bf16 on strata-compile), "
                 "with no loss scaling"},
    MegatronFlag{"--loss-scale", Where::Absent,
                 "strata has no fp16 loss scaling"},
    MegatronFlag{"--initial-loss-scale", Where::Absent,
                 "strata has no fp16 loss scaling"},
    MegatronFlag{"--use-flash-attn", Where::Absent,
                 "strata's attention kernels are always the fused ones"},
    MegatronFlag{"--expert-model-parallel-size", Where::Absent,
                 "strata has no mixture of experts"},
    MegatronFlag{"--num-experts", Where::Absent,
                 "strata has no mixture of experts"},
    MegatronFlag{"--fp8-format", Where::Absent, "strata has no fp8"},
    MegatronFlag{"--transformer-impl", Where::Absent,
                 "strata has one implementation"},
    MegatronFlag{"--use-mcore-models", Where::Absent,
                 "strata's models are its model files"},
    MegatronFlag{"--tensorboard-dir", Where::Absent,
                 "strata writes its log and --trace, not TensorBoard"},
    MegatronFlag{"--wandb-project", Where::Absent, "strata has no W&B logging"},
    MegatronFlag{"--train-samples", Where::Absent,
                 "strata counts iterations: --train-iters"},
    MegatronFlag{"--rampup-batch-size", Where::Absent,
                 "strata's global batch is fixed by its plan"},
    MegatronFlag{"--lr-warmup-fraction", Where::Absent,
                 "strata takes --lr-warmup-iters"},
    MegatronFlag{"--finetune", Where::Absent,
                 "start from weights with --load-safetensors"},
    MegatronFlag{"--no-load-optim", Where::Absent,
                 "start from weights alone with --load-safetensors"},
    MegatronFlag{"--use-checkpoint-args", Where::Absent,
                 "a strata checkpoint is checked against the plan"},
    MegatronFlag{"--distributed-backend", Where::Absent,
                 "strata picks its transport: threads, MPI, or NCCL on GPUs"},
    MegatronFlag{"--num-workers", Where::Absent,
                 "strata reads samples on the rank's thread"},
    MegatronFlag{"--dataloader-type", Where::Absent,
                 "strata's sampler is Megatron's single sampler"},
    MegatronFlag{"--mock-data", Where::Absent,
                 "without --data-path strata-run trains on synthetic tokens"},
};

} // namespace

std::string explainMegatronFlag(std::string_view flag, StrataTool tool) {
  // Megatron accepts underscores too (argparse's dest names do not).
  std::string name(flag);
  for (char &c : name)
    if (c == '_')
      c = '-';
  if (name.rfind("--", 0) != 0)
    name = (name.rfind("-", 0) == 0 ? "-" : "--") + name;
  for (const MegatronFlag &known : kFlags) {
    if (name != known.flag)
      continue;
    std::string said = "'" + std::string(flag) + "' is Megatron-LM's; ";
    switch (known.where) {
    case Where::Compile:
      if (tool == StrataTool::Compile)
        return ""; // strata-compile takes it: not this table's to explain
      return said + "in strata it is strata-compile's (the layout and the "
                    "batch are the plan's): give it there";
    case Where::Run:
      if (*known.note)
        return said + "strata-run takes " + known.note + " instead";
      if (tool == StrataTool::Run)
        return "";
      return said + "in strata it is strata-run's (the training run's): "
                    "give it there";
    case Where::Model:
      return said + "in strata the model file says it: " + known.note;
    case Where::Data:
      return said + "in strata it is strata-data preprocess's";
    case Where::Absent:
      return said + known.note;
    }
  }
  return "";
}

} // namespace strata::tools
