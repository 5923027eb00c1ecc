//===- HuggingFace.h - weights under Hugging Face's names --------*- C++
//-*-===//
//
// strata's parameters are global tensors named as the model file names
// them, matrices [in, out] (x · W). Hugging Face's transformers name and
// lay them out per model family:
//   hf-gpt2   GPT2LMHeadModel: transformer.wte/wpe, transformer.h.N.ln_1,
//             attn.c_attn (q, k and v side by side, Conv1D [in, 3·out]),
//             attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj (Conv1D [in, out]),
//             transformer.ln_f; the output layer tied to wte.
//   hf-llama  LlamaForCausalLM: model.embed_tokens, model.layers.N.
//             input_layernorm, self_attn.q/k/v/o_proj, post_attention_
//             layernorm, mlp.gate/up/down_proj (nn.Linear [out, in]),
//             model.norm, lm_head. Rotary embeddings rotate halves in both,
//             so q and k need no permutation.
//   strata    strata's own names and layouts.
// The mapping is by strata's names as examples/gpt-tiny.model (and
// gpt2-124m) and examples/llama-tiny.model write them.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_IO_HUGGINGFACE_H
#define STRATA_RUNTIME_IO_HUGGINGFACE_H

#include "runtime/io/Safetensors.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace strata::runtime {

enum class NameScheme { Strata, HfGpt2, HfLlama };

/// "strata", "hf-gpt2" or "hf-llama"; "" or what is wrong.
std::string parseNameScheme(const std::string &text, NameScheme &scheme);

/// strata's global tensors under `scheme`'s names and layouts; "" or the
/// first tensor the scheme has no name for.
std::string exportTensors(const std::map<std::string, HostTensor> &strata,
                          NameScheme scheme,
                          std::map<std::string, HostTensor> &out);

/// The tensors of a file named by `scheme`, as strata's parameters
/// `model` (names and global shapes); "" or what is missing, mismatched
/// or, when `model` is the whole model, left over, naming the file's
/// tensor.
std::string
importTensors(const std::map<std::string, HostTensor> &file, NameScheme scheme,
              const std::map<std::string, std::vector<int64_t>> &model,
              bool wholeModel, std::map<std::string, HostTensor> &out);

/// What Hugging Face's config.json needs that the weights do not say
/// (Megatron's flag names).
struct HfConfigOptions {
  int64_t numAttentionHeads = 0;
  double normEpsilon = 1e-5;
  double rotaryBase = 10000;
  int64_t maxPositionEmbeddings = 0; // LLaMA's; GPT-2's is wpe's rows
  std::string gelu; // the checkpoint's (Plan::gelu): GPT-2's activation
};

/// The weights --load-safetensors names: a .safetensors file; Hugging
/// Face's sharded index (NAME.safetensors.index.json, whose weight_map
/// names each tensor's file beside it), every file it names read; or a
/// directory holding model.safetensors.index.json or model.safetensors.
/// `config` is the config.json beside them, "" if there is none. "" or
/// what is wrong, naming the file.
std::string readWeights(const std::string &path,
                        std::map<std::string, HostTensor> &tensors,
                        std::string &config);

/// GPT-2's config.json activation_function for a model's GELU (Plan::gelu):
/// "gelu" for the exact one, "gelu_new" for the tanh form; "" for none or
/// both.
std::string hfGpt2Activation(const std::string &gelu);

/// Whether a GPT-2 config.json's activation_function is the GELU `gelu`
/// (Plan::gelu) computes: "" or what differs, and how to write the model.
std::string checkHfGpt2Activation(const std::string &configJson,
                                  const std::string &gelu);

/// config.json for tensors `exportTensors` named by `scheme` (hf-gpt2 or
/// hf-llama): the sizes read off the weights, the rest from `options`;
/// GPT-2's activation is the model's GELU: "gelu" for the exact one,
/// "gelu_new" for the tanh form. "" or what is wrong.
std::string huggingFaceConfig(const std::map<std::string, HostTensor> &tensors,
                              NameScheme scheme, const HfConfigOptions &options,
                              std::string &json);

} // namespace strata::runtime

#endif
