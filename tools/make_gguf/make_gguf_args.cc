// parse_make_gguf_args: flags -> RandomLlamaOptions (see tools/make_gguf/make_gguf_args.h).
#include "tools/make_gguf/make_gguf_args.h"

#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace flashserve::tools {
namespace {

using model::GgmlType;

// --type values in the order the usage lists them (every type we can encode).
const GgmlType kTypes[] = {
    GgmlType::kQ4_1, GgmlType::kQ4_0, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0,
    GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,
    GgmlType::kIQ4_NL, GgmlType::kIQ4_XS, GgmlType::kF16, GgmlType::kBF16, GgmlType::kF32,
};

// Flags that take a value, in the order the usage lists them.
const char* const kValueFlags[] = {"--tokenizer-from", "--out",  "--preset",     "--type",  "--ftype",
                                   "--seed",           "--threads", "--layers",  "--hidden",
                                   "--heads",          "--kv-heads", "--ffn",    "--context",
                                   "--rope-theta",     "--rms-eps", "--tied-embeddings", "--name",
                                   "--arch",           "--head-dim", "--sliding-window",
                                   "--rope-linear-factor"};

absl::Status bad_value(const std::string& flag, const std::string& value, const std::string& expected) {
  return absl::InvalidArgumentError(absl::StrCat("bad value '", value, "' for ", flag, ": expected ", expected));
}

// ggml's names ("q4_K"), matched case-insensitively ("q4_k" too).
absl::StatusOr<GgmlType> parse_type(const std::string& value) {
  std::vector<std::string> names;
  for (GgmlType type : kTypes) {
    const std::string name = model::ggml_type_name(type);
    if (absl::AsciiStrToLower(value) == absl::AsciiStrToLower(name)) return type;
    names.push_back(name);
  }
  return bad_value("--type", value, absl::StrJoin(names, ", "));
}

absl::Status parse_int(const std::string& flag, const std::string& value, int* out) {
  if (!absl::SimpleAtoi(value, out) || *out <= 0) return bad_value(flag, value, "a positive integer");
  return absl::OkStatus();
}

absl::Status parse_float(const std::string& flag, const std::string& value, float* out) {
  if (!absl::SimpleAtof(value, out) || !(*out > 0) || *out > 1e30f) return bad_value(flag, value, "a positive number");
  return absl::OkStatus();
}

// Applies one shape override or option (every flag but --preset).
absl::Status apply_flag(const std::string& flag, const std::string& value, RandomLlamaOptions* o) {
  LlamaShape& s = o->shape;
  if (flag == "--tokenizer-from") o->tokenizer_from = value;
  else if (flag == "--out") o->out = value;
  else if (flag == "--name") o->name = value;
  else if (flag == "--layers") return parse_int(flag, value, &s.num_layers);
  else if (flag == "--hidden") return parse_int(flag, value, &s.hidden_size);
  else if (flag == "--heads") return parse_int(flag, value, &s.num_heads);
  else if (flag == "--kv-heads") return parse_int(flag, value, &s.num_kv_heads);
  else if (flag == "--ffn") return parse_int(flag, value, &s.ffn_size);
  else if (flag == "--context") return parse_int(flag, value, &s.context_length);
  else if (flag == "--rope-theta") return parse_float(flag, value, &s.rope_theta);
  else if (flag == "--rms-eps") return parse_float(flag, value, &s.rms_eps);
  else if (flag == "--head-dim") return parse_int(flag, value, &s.head_dim);
  else if (flag == "--sliding-window") return parse_int(flag, value, &s.sliding_window);
  else if (flag == "--rope-linear-factor") return parse_float(flag, value, &s.rope_linear_factor);
  else if (flag == "--arch") s.architecture = value;
  else if (flag == "--seed") {
    if (!absl::SimpleAtoi(value, &o->seed)) return bad_value(flag, value, "an unsigned 64-bit integer");
  } else if (flag == "--threads") {
    if (!absl::SimpleAtoi(value, &o->num_threads) || o->num_threads < 0 || o->num_threads > 1024) {
      return bad_value(flag, value, "0 (every hardware thread) to 1024");
    }
  } else if (flag == "--tied-embeddings") {
    if (value != "true" && value != "false") return bad_value(flag, value, "true or false");
    s.tied_embeddings = value == "true";
  } else if (flag == "--type") {
    ASSIGN_OR_RETURN(o->weight_type, parse_type(value));
  } else if (flag == "--ftype") {
    ASSIGN_OR_RETURN(o->mix, parse_quant_mix(value));
  }
  return absl::OkStatus();
}

// argv -> flag/value pairs in order (no value semantics yet); --vocab-only and --help have
// no value.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> split_flags(const std::vector<std::string>& args,
                                                                             MakeGgufArgs* out) {
  std::vector<std::pair<std::string, std::string>> flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--help" || flag == "-h") {
      out->help = true;
      continue;
    }
    if (flag == "--vocab-only") {
      out->options.vocab_only = true;
      continue;
    }
    bool known = false;
    for (const char* f : kValueFlags) known = known || flag == f;
    if (!known) return absl::InvalidArgumentError(absl::StrCat("unknown flag '", flag, "' (see --help)"));
    if (i + 1 >= args.size()) return absl::InvalidArgumentError(absl::StrCat("missing value after ", flag));
    flags.emplace_back(flag, args[++i]);
  }
  return flags;
}

}  // namespace

std::string make_gguf_usage() {
  return absl::StrCat(
      "usage: flashserve-make-gguf --tokenizer-from GGUF --out PATH [--preset NAME] [--type TYPE | --ftype MIX]\n"
      "                            [--seed N] [--threads N] [--layers N] [--hidden N] [--heads N]\n"
      "                            [--kv-heads N] [--ffn N] [--context N] [--rope-theta F] [--rms-eps F]\n"
      "                            [--tied-embeddings true|false] [--arch NAME] [--head-dim N]\n"
      "                            [--name TEXT] [--vocab-only]\n"
      "\n"
      "Writes a Llama-family GGUF with random weights (not a trained model) and the tokenizer\n"
      "of another GGUF: every tokenizer.* key (vocabulary, merges, special ids, chat template) is\n"
      "copied, and the vocabulary size is its token count. The file is streamed tensor by tensor\n"
      "(memory: two tensors; the next is generated and quantized on all threads while one is\n"
      "written); the bytes depend on --seed and the shape only. Weights ~ N(0, 0.02^2), RMSNorm\n"
      "weights 1 + N(0, 0.02^2): activations stay finite through many layers, like a real model's.\n"
      "\n"
      "  --tokenizer-from GGUF  the file whose tokenizer.* keys are copied (a --vocab-only file works)\n"
      "  --out PATH             the file written (via PATH.part, renamed when complete)\n"
      "  --preset NAME          the shape to start from (default smollm2-135m):\n"
      "                           smollm2-135m  30 layers, hidden 576, 9/3 heads, ffn 1536, tied,\n"
      "                                         rope_theta 1e5, context 8192\n"
      "                           llama-3.2-1b  16 layers, hidden 2048, 32/8 heads, ffn 8192, tied,\n"
      "                                         rope_theta 5e5, context 131072, Llama 3 RoPE x32\n"
      "                           llama-3.1-8b  32 layers, hidden 4096, 32/8 heads (head_dim 128),\n"
      "                                         ffn 14336, untied, rope_theta 5e5, context 131072,\n"
      "                                         Llama 3 RoPE x8\n"
      "                           qwen2.5-0.5b  qwen2: 24 layers, hidden 896, 14/2 heads, ffn 4864,\n"
      "                                         tied, Q/K/V biases, rope_theta 1e6\n"
      "                           qwen3-0.6b    qwen3: 28 layers, hidden 1024, 16/8 heads of 128,\n"
      "                                         ffn 3072, tied, Q/K norms, rope_theta 1e6\n"
      "                           gemma-3-1b    gemma3: 26 layers, hidden 1152, 4/1 heads of 256,\n"
      "                                         ffn 6912, tied, window 512, rope_theta 1e6\n"
      "                           gemma-3-4b    gemma3: 34 layers, hidden 2560, 8/4 heads of 256,\n"
      "                                         ffn 10240, tied, window 1024, global RoPE linear x8\n"
      "                           phi-3-mini    phi3: 32 layers, hidden 3072, 32/32 heads of 96,\n"
      "                                         ffn 8192, untied, window 2047, context 4096\n"
      "  --type TYPE            every 2-D weight in TYPE: q4_1 (default), q4_0, q5_0, q5_1, q8_0, q2_K, q3_K,\n"
      "                         q4_K, q5_K, q6_K, iq4_nl, iq4_xs, f16, bf16, f32; norms stay f32. Rows that\n"
      "                         are not whole 256-value blocks fall back as llama.cpp does (q4_K -> q5_0,\n"
      "                         q5_K -> q5_1, q6_K -> q8_0, q2_K/q3_K -> q4_0, iq4_xs -> iq4_nl)\n"
      "  --ftype MIX            llama.cpp's per-tensor mixture of a quantize preset: q4_k_m, q5_k_m\n"
      "                         (q6_K for output, tied token_embd and some layers' attn_v / ffn_down),\n"
      "                         q6_k, q8_0; general.file_type is the preset's\n"
      "  --seed N               random seed (default 0)\n"
      "  --threads N            threads generating/quantizing (default 0: every hardware thread)\n"
      "  --layers --hidden --heads --kv-heads --ffn --context --rope-theta --rms-eps\n"
      "  --tied-embeddings      override the preset's shape (head_dim = hidden / heads)\n"
      "  --arch NAME            llama, mistral, qwen2 (Q/K/V biases), qwen3 (Q/K norms), gemma3\n"
      "                         (Q/K norms, post-norms; served with GeGLU and local layers) or\n"
      "                         phi3 (fused attn_qkv and gate/up ffn_up)\n"
      "  --head-dim N           head_dim other than hidden / heads (attention.key_length)\n"
      "  --sliding-window N     gemma3, phi3: the local layers' window (attention.sliding_window)\n"
      "  --rope-linear-factor F rope.scaling linear with factor F (gemma3: its global layers)\n"
      "  --name TEXT            general.name (default: flashserve-random-<preset>-<type>)\n"
      "  --vocab-only           write only the general.* and tokenizer.* keys (a small file to carry)\n"
      "\n"
      "Time, measured on the 2-core build machine (shared, load ~8; RelWithDebInfo): the smollm2-135m\n"
      "shape in q4_1 (134.5M parameters, 86 MB) takes 1.2-1.6 s (0.6 s of CPU); the llama-3.1-8b shape\n"
      "(7.4G parameters, 4.6 GB) ~35 s of CPU, spread over every core, plus the disk's write time.\n"
      "K-quants and IQ4 search their scales: the llama-3.2-1b shape with --layers 2 (121M parameters)\n"
      "takes ~4 s of CPU in q4_k_m or q6_K (~30M values per second and core), ~8 s in q2_K, ~11 s in\n"
      "iq4_xs; the llama-3.1-8b shape in q4_k_m ~250 CPU-seconds.\n");
}

absl::StatusOr<MakeGgufArgs> parse_make_gguf_args(const std::vector<std::string>& args) {
  MakeGgufArgs out;
  ASSIGN_OR_RETURN(const auto flags, split_flags(args, &out));  // [(flag, value)]
  if (out.help) return out;
  std::string preset = "smollm2-135m";
  for (const auto& [flag, value] : flags) {
    if (flag == "--preset") preset = value;
  }
  RandomLlamaOptions& o = out.options;
  ASSIGN_OR_RETURN(o.shape, llama_preset(preset));
  for (const auto& [flag, value] : flags) {
    RETURN_IF_ERROR(apply_flag(flag, value, &o));
  }
  if (o.tokenizer_from.empty()) return absl::InvalidArgumentError("--tokenizer-from GGUF is required");
  if (o.out.empty()) return absl::InvalidArgumentError("--out PATH is required");
  bool has_type = false, has_ftype = false;
  for (const auto& [flag, value] : flags) {
    has_type = has_type || flag == "--type";
    has_ftype = has_ftype || flag == "--ftype";
  }
  if (has_type && has_ftype) {
    return absl::InvalidArgumentError("--type and --ftype exclude each other (one type, or a preset's mixture)");
  }
  const bool pure = o.mix == QuantMix::kPure;
  if (o.name.empty()) {
    o.name = absl::StrCat("flashserve-random-", preset, "-",
                          pure ? model::ggml_type_name(o.weight_type) : quant_mix_name(o.mix));
  }
  if (!o.vocab_only) {
    RETURN_IF_ERROR(validate_shape(o.shape, pure ? o.weight_type : quant_mix_default_type(o.mix)));
  }
  return out;
}

}  // namespace flashserve::tools
