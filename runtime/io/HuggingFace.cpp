//===- HuggingFace.cpp - weights under Hugging Face's names ---------------===//
#include "runtime/io/HuggingFace.h"
#include "runtime/base/JsonReader.h"
#include "runtime/base/WholeFile.h"
#include "runtime/plan/Plan.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

namespace strata::runtime {

namespace {

/// Where a strata parameter lives in the other scheme: a tensor, as is,
/// transposed, or one of `parts` equal blocks of its last dimension.
struct Source {
  std::string name;
  enum Kind { Same, Transpose, Block } kind = Same;
  int part = 0, parts = 1;
};

/// "layers.N.rest" → N and rest.
bool layerOf(const std::string &name, std::string &index, std::string &rest) {
  if (!name.starts_with("layers."))
    return false;
  size_t dot = name.find('.', 7);
  if (dot == std::string::npos || dot == 7 ||
      name.find_first_not_of("0123456789", 7) != dot)
    return false;
  index = name.substr(7, dot - 7);
  rest = name.substr(dot + 1);
  return true;
}

bool sourceOf(NameScheme scheme, const std::string &name, Source &source) {
  using K = Source::Kind;
  if (scheme == NameScheme::Strata) {
    source = {name, K::Same};
    return true;
  }
  std::string index, rest;
  bool layer = layerOf(name, index, rest);
  if (scheme == NameScheme::HfGpt2) {
    static const std::map<std::string, std::string> top = {
        {"wte", "transformer.wte.weight"},
        {"wpe", "transformer.wpe.weight"},
        {"ln_f.weight", "transformer.ln_f.weight"},
        {"ln_f.bias", "transformer.ln_f.bias"}};
    static const std::map<std::string, std::string> inLayer = {
        {"ln1.weight", "ln_1.weight"},
        {"ln1.bias", "ln_1.bias"},
        {"attn.proj.weight", "attn.c_proj.weight"},
        {"attn.proj.bias", "attn.c_proj.bias"},
        {"ln2.weight", "ln_2.weight"},
        {"ln2.bias", "ln_2.bias"},
        {"mlp.fc1.weight", "mlp.c_fc.weight"},
        {"mlp.fc1.bias", "mlp.c_fc.bias"},
        {"mlp.fc2.weight", "mlp.c_proj.weight"},
        {"mlp.fc2.bias", "mlp.c_proj.bias"}};
    if (!layer) {
      auto it = top.find(name);
      if (it == top.end())
        return false;
      source = {it->second, K::Same};
      return true;
    }
    std::string prefix = "transformer.h." + index + ".";
    // q, k and v side by side in c_attn (Conv1D: [in, 3·out]).
    static const char *const kQkv[] = {"q", "k", "v"};
    for (int p = 0; p < 3; ++p)
      for (const char *what : {"weight", "bias"})
        if (rest == std::string("attn.") + kQkv[p] + "." + what) {
          source = {prefix + "attn.c_attn." + what, K::Block, p, 3};
          return true;
        }
    auto it = inLayer.find(rest);
    if (it == inLayer.end())
      return false;
    source = {prefix + it->second, K::Same};
    return true;
  }
  // hf-llama: nn.Linear stores [out, in], strata [in, out].
  static const std::map<std::string, std::pair<std::string, bool>> top = {
      {"embed", {"model.embed_tokens.weight", false}},
      {"norm.weight", {"model.norm.weight", false}},
      {"output.weight", {"lm_head.weight", true}}};
  static const std::map<std::string, std::pair<std::string, bool>> inLayer = {
      {"attn_norm.weight", {"input_layernorm.weight", false}},
      {"attn.q.weight", {"self_attn.q_proj.weight", true}},
      {"attn.k.weight", {"self_attn.k_proj.weight", true}},
      {"attn.v.weight", {"self_attn.v_proj.weight", true}},
      {"attn.o.weight", {"self_attn.o_proj.weight", true}},
      {"mlp_norm.weight", {"post_attention_layernorm.weight", false}},
      {"mlp.gate.weight", {"mlp.gate_proj.weight", true}},
      {"mlp.up.weight", {"mlp.up_proj.weight", true}},
      {"mlp.down.weight", {"mlp.down_proj.weight", true}}};
  const auto &table = layer ? inLayer : top;
  auto it = table.find(layer ? rest : name);
  if (it == table.end())
    return false;
  source = {(layer ? "model.layers." + index + "." : std::string()) +
                it->second.first,
            it->second.second ? K::Transpose : K::Same};
  return true;
}

HostTensor transposed(const HostTensor &t) {
  int64_t rows = t.shape[0], cols = t.shape[1];
  HostTensor out{{cols, rows}, std::vector<float>(t.values.size())};
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out.values[c * rows + r] = t.values[r * cols + c];
  return out;
}

/// Rows of a tensor, viewed as [rows, last dimension].
int64_t rowsOf(const std::vector<int64_t> &shape) {
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d)
    rows *= shape[d];
  return rows;
}

} // namespace

std::string parseNameScheme(const std::string &text, NameScheme &scheme) {
  if (text == "strata")
    scheme = NameScheme::Strata;
  else if (text == "hf-gpt2")
    scheme = NameScheme::HfGpt2;
  else if (text == "hf-llama")
    scheme = NameScheme::HfLlama;
  else
    return "--names " + text + ": strata, hf-gpt2 or hf-llama";
  return "";
}

std::string exportTensors(const std::map<std::string, HostTensor> &strata,
                          NameScheme scheme,
                          std::map<std::string, HostTensor> &out) {
  out.clear();
  // Blocks first gathered by their tensor, then laid side by side.
  std::map<std::string, std::vector<const HostTensor *>> blocks;
  for (const auto &[name, tensor] : strata) {
    Source source;
    if (!sourceOf(scheme, name, source))
      return "parameter '" + name + "' has no name in this scheme";
    if (source.kind == Source::Transpose) {
      if (tensor.shape.size() != 2)
        return "parameter '" + name + "' is not a matrix";
      out[source.name] = transposed(tensor);
    } else if (source.kind == Source::Block) {
      auto &parts = blocks[source.name];
      parts.resize(size_t(source.parts), nullptr);
      parts[size_t(source.part)] = &tensor;
    } else {
      out[source.name] = tensor;
    }
  }
  for (const auto &[name, parts] : blocks) {
    for (const HostTensor *part : parts)
      if (!part || part->shape != parts[0]->shape || part->shape.empty())
        return "'" + name + "' needs its " + std::to_string(parts.size()) +
               " blocks (q, k, v) of one shape";
    std::vector<int64_t> shape = parts[0]->shape;
    int64_t width = shape.back(), rows = rowsOf(shape);
    shape.back() = width * int64_t(parts.size());
    HostTensor joined{shape, std::vector<float>(size_t(rows * shape.back()))};
    for (size_t p = 0; p < parts.size(); ++p)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < width; ++c)
          joined.values[r * shape.back() + int64_t(p) * width + c] =
              parts[p]->values[r * width + c];
    out[name] = std::move(joined);
  }
  return "";
}

std::string
importTensors(const std::map<std::string, HostTensor> &file, NameScheme scheme,
              const std::map<std::string, std::vector<int64_t>> &model,
              bool wholeModel, std::map<std::string, HostTensor> &out) {
  out.clear();
  // GPT-2's files come with or without GPT2LMHeadModel's "transformer."
  // prefix.
  auto find = [&](const std::string &name) {
    auto it = file.find(name);
    if (it == file.end() && scheme == NameScheme::HfGpt2 &&
        name.starts_with("transformer."))
      it = file.find(name.substr(12));
    return it;
  };
  std::set<std::string> used;
  for (const auto &[name, shape] : model) {
    Source source;
    if (!sourceOf(scheme, name, source))
      return "parameter '" + name + "' has no name in this scheme";
    auto it = find(source.name);
    if (it == file.end())
      return "no tensor '" + source.name + "' (for parameter '" + name + "')";
    used.insert(it->first);
    const HostTensor &tensor = it->second;
    HostTensor value;
    if (source.kind == Source::Transpose) {
      if (tensor.shape.size() != 2)
        return "'" + it->first + "' is not a matrix";
      value = transposed(tensor);
    } else if (source.kind == Source::Block) {
      if (tensor.shape.empty() || tensor.shape.back() % source.parts != 0)
        return "'" + it->first + "' " + shapeText(tensor.shape) +
               " does not split into " + std::to_string(source.parts) +
               " blocks";
      std::vector<int64_t> blockShape = tensor.shape;
      int64_t whole = blockShape.back(), width = whole / source.parts,
              rows = rowsOf(blockShape);
      blockShape.back() = width;
      value = {blockShape, std::vector<float>(size_t(rows * width))};
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < width; ++c)
          value.values[r * width + c] =
              tensor.values[r * whole + int64_t(source.part) * width + c];
    } else {
      value = tensor;
    }
    if (value.shape != shape)
      return "'" + it->first + "' gives parameter '" + name + "' the shape " +
             shapeText(value.shape) + "; the model's is " + shapeText(shape);
    out[name] = std::move(value);
  }
  // What is left must be what the scheme carries beside the weights.
  for (const auto &[name, tensor] : file) {
    if (used.count(name) || !wholeModel)
      continue;
    bool buffer = (scheme == NameScheme::HfGpt2 &&
                   (name.ends_with(".attn.bias") ||
                    name.ends_with(".attn.masked_bias"))) ||
                  (scheme == NameScheme::HfLlama &&
                   name.ends_with(".rotary_emb.inv_freq"));
    // GPT-2's output layer is its word embedding, saved or not.
    bool tied = scheme == NameScheme::HfGpt2 && name == "lm_head.weight" &&
                out.count("wte") && out["wte"].values == tensor.values;
    if (!buffer && !tied)
      return "tensor '" + name + "' is not a parameter of this model";
  }
  return "";
}

namespace {

/// A sharded index's weight_map: tensor name → file name.
std::string readWeightMap(const std::string &path,
                          std::map<std::string, std::string> &weightMap) {
  std::string json;
  if (std::string error = readFileWhole(path, json, kJsonFile); !error.empty())
    return error;
  std::string bad = "'" + path +
                    "' is not a safetensors index (an object with a "
                    "weight_map of tensor names to files)";
  JsonReader r(json);
  bool found = false;
  if (!r.eat('{'))
    return bad;
  if (!r.eat('}')) {
    do {
      std::string key;
      if (!r.string(key) || !r.eat(':'))
        return bad;
      if (key != "weight_map") {
        if (!r.skipValue())
          return bad;
        continue;
      }
      found = true;
      if (!r.stringObject(weightMap))
        return bad;
    } while (r.eat(','));
    if (!r.eat('}'))
      return bad;
  }
  if (!r.done() || !found)
    return bad;
  if (weightMap.empty())
    return "'" + path + "' names no tensors";
  return "";
}

} // namespace

std::string readWeights(const std::string &path,
                        std::map<std::string, HostTensor> &tensors,
                        std::string &config) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path file = path;
  if (fs::is_directory(file, ec)) {
    fs::path index = file / "model.safetensors.index.json",
             single = file / "model.safetensors";
    file = fs::exists(index, ec) ? index : single;
    if (!fs::exists(file, ec))
      return "'" + path +
             "' holds neither model.safetensors nor "
             "model.safetensors.index.json";
  }
  fs::path directory = file.parent_path();
  config = fs::exists(directory / "config.json", ec)
               ? (directory / "config.json").string()
               : "";
  if (file.extension() != ".json")
    return readSafetensors(file.string(), tensors);

  std::map<std::string, std::string> weightMap;
  if (std::string error = readWeightMap(file.string(), weightMap);
      !error.empty())
    return error;
  std::set<std::string> shards;
  for (const auto &[tensor, shard] : weightMap) {
    if (shard.empty() || shard.find('/') != std::string::npos)
      return "'" + file.string() + "' puts '" + tensor + "' in '" + shard +
             "', not a file beside it";
    shards.insert(shard);
  }
  // Each shard's tensors are the ones the index puts there (tensors of
  // dtypes other than floats, such as masks, are left out when read).
  for (const std::string &shard : shards) {
    std::string shardPath = (directory / shard).string();
    std::map<std::string, HostTensor> part;
    if (std::string error = readSafetensors(shardPath, part); !error.empty())
      return error;
    for (auto &[tensor, value] : part) {
      auto it = weightMap.find(tensor);
      if (it == weightMap.end() || it->second != shard)
        return "'" + shardPath + "' holds '" + tensor + "', which '" +
               file.string() + "' puts " +
               (it == weightMap.end() ? std::string("in no file")
                                      : "in '" + it->second + "'");
      tensors[tensor] = std::move(value);
    }
  }
  return "";
}

std::string hfGpt2Activation(const std::string &gelu) {
  return gelu == "exact" ? "gelu" : gelu == "tanh" ? "gelu_new" : "";
}

std::string checkHfGpt2Activation(const std::string &configJson,
                                  const std::string &gelu) {
  std::string activation = "gelu_new"; // GPT2Config's default
  bool given = false;
  if (std::string error = jsonStringField(configJson, "activation_function",
                                          activation, &given);
      !error.empty())
    return error;
  // Hugging Face's names of the two forms; gelu_pytorch_tanh and gelu_fast
  // compute the tanh one too.
  std::string form = activation == "gelu" ? "exact"
                     : activation == "gelu_new" ||
                             activation == "gelu_pytorch_tanh" ||
                             activation == "gelu_fast"
                         ? "tanh"
                         : "";
  if (!form.empty() && form == gelu)
    return "";
  std::string ours = describeGelu(gelu);
  if (form.empty())
    return "activation_function is " + activation +
           ", which strata does not compute; this plan's model computes " +
           ours;
  std::string how = gelu != "exact" && gelu != "tanh" ? ""
                    : form == "tanh" ? ": write gelu(x, tanh=true) (the "
                                       "examples: --set openai_gelu=true)"
                                     : ": write gelu(x) without tanh=true";
  return "activation_function is " + activation + " (the " + form +
         " GELU); this plan's model computes " + ours + how;
}

std::string huggingFaceConfig(const std::map<std::string, HostTensor> &tensors,
                              NameScheme scheme, const HfConfigOptions &options,
                              std::string &json) {
  auto shape = [&](const std::string &name) -> std::vector<int64_t> {
    auto it = tensors.find(name);
    return it == tensors.end() ? std::vector<int64_t>{} : it->second.shape;
  };
  auto layers = [&](const std::string &prefix, const std::string &leaf) {
    int64_t n = 0;
    while (tensors.count(prefix + std::to_string(n) + leaf))
      ++n;
    return n;
  };
  auto number = [](double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.17g", v);
    return std::string(text);
  };
  auto n = [](int64_t v) { return std::to_string(v); };
  int64_t heads = options.numAttentionHeads;
  if (heads < 1)
    return "config.json needs --num-attention-heads";
  if (scheme == NameScheme::HfGpt2) {
    auto wte = shape("transformer.wte.weight"),
         wpe = shape("transformer.wpe.weight"),
         fc = shape("transformer.h.0.mlp.c_fc.weight");
    int64_t depth = layers("transformer.h.", ".ln_1.weight");
    if (wte.size() != 2 || wpe.size() != 2 || fc.size() != 2 || depth < 1)
      return "the tensors are not a GPT-2's";
    if (wte[1] % heads)
      return "--num-attention-heads " + std::to_string(heads) +
             " does not divide the hidden size " + std::to_string(wte[1]);
    std::string activation = hfGpt2Activation(options.gelu);
    if (activation.empty())
      return "GPT-2's config.json names one GELU (activation_function); "
             "the checkpoint's model computes " +
             (options.gelu.empty() ? std::string("none")
                                   : "both forms (" + options.gelu + ")");
    json = jsonObject(
        {{"architectures", "[" + jsonString("GPT2LMHeadModel") + "]"},
         {"model_type", jsonString("gpt2")},
         {"vocab_size", n(wte[0])},
         {"n_positions", n(wpe[0])},
         {"n_ctx", n(wpe[0])},
         {"n_embd", n(wte[1])},
         {"n_layer", n(depth)},
         {"n_head", n(heads)},
         {"n_inner", n(fc[1])},
         {"activation_function", jsonString(activation)},
         {"layer_norm_epsilon", number(options.normEpsilon)},
         {"tie_word_embeddings", "true"},
         {"torch_dtype", jsonString("float32")}});
    return "";
  }
  if (scheme != NameScheme::HfLlama)
    return "config.json is Hugging Face's: --names hf-gpt2 or hf-llama";
  auto embed = shape("model.embed_tokens.weight"),
       k = shape("model.layers.0.self_attn.k_proj.weight"),
       gate = shape("model.layers.0.mlp.gate_proj.weight");
  int64_t depth = layers("model.layers.", ".input_layernorm.weight");
  if (embed.size() != 2 || k.size() != 2 || gate.size() != 2 || depth < 1)
    return "the tensors are not a LLaMA's";
  int64_t hidden = embed[1];
  if (hidden % heads || k[0] % (hidden / heads))
    return "--num-attention-heads " + std::to_string(heads) +
           " does not divide the hidden size " + std::to_string(hidden) +
           " and the key width " + std::to_string(k[0]);
  if (options.maxPositionEmbeddings < 1)
    return "config.json needs --max-position-embeddings for LLaMA";
  json =
      jsonObject({{"architectures", "[" + jsonString("LlamaForCausalLM") + "]"},
                  {"model_type", jsonString("llama")},
                  {"vocab_size", n(embed[0])},
                  {"hidden_size", n(hidden)},
                  {"intermediate_size", n(gate[0])},
                  {"num_hidden_layers", n(depth)},
                  {"num_attention_heads", n(heads)},
                  {"num_key_value_heads", n(k[0] / (hidden / heads))},
                  {"max_position_embeddings", n(options.maxPositionEmbeddings)},
                  {"hidden_act", jsonString("silu")},
                  {"rms_norm_eps", number(options.normEpsilon)},
                  {"rope_theta", number(options.rotaryBase)},
                  {"attention_bias", "false"},
                  {"tie_word_embeddings", "false"},
                  {"torch_dtype", jsonString("float32")}});
  return "";
}

} // namespace strata::runtime
