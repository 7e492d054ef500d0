#include "model/text/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "model/text/utf8.h"

namespace flashserve::model {

// Owns one compiled (and, where the platform allows, JIT-compiled) PCRE2 pattern.
class CompiledRegex {
 public:
  static absl::StatusOr<std::shared_ptr<const CompiledRegex>> compile(std::string_view pattern) {
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()),
                                     pattern.size(), PCRE2_UTF | PCRE2_UCP, &error,
                                     &error_offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      return absl::InternalError(absl::StrCat("pretokenizer: regex '", to_absl(pattern),
                                              "' does not compile at offset ", error_offset,
                                              ": ", reinterpret_cast<const char*>(message)));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // falls back to the interpreter on failure
    return std::shared_ptr<const CompiledRegex>(new CompiledRegex(code));
  }
  ~CompiledRegex() { pcre2_code_free(code_); }
  CompiledRegex(const CompiledRegex&) = delete;
  CompiledRegex& operator=(const CompiledRegex&) = delete;

  // Appends to `out` the pieces of `piece`: matches and the unmatched stretches between them.
  void split(std::string_view piece, pcre2_match_data* match,
             std::vector<std::string_view>& out) const {
    size_t pos = 0;      // where the next search starts
    size_t emitted = 0;  // end of the last piece appended
    while (pos < piece.size()) {
      int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(piece.data()), piece.size(), pos,
                           PCRE2_NO_UTF_CHECK, match, nullptr);
      if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
        // A resource limit of the JIT (none of our patterns is known to reach one): retry
        // with the interpreter, whose limits are larger.
        rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(piece.data()), piece.size(), pos,
                         PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, match, nullptr);
      }
      if (rc < 0) break;  // no further match (or a persistent error): the rest is one piece
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
      size_t begin = ovector[0];
      size_t end = ovector[1];
      if (end == begin) {  // empty match: none of our patterns does this, but never loop
        pos = begin + utf8_sequence_length(static_cast<unsigned char>(piece[begin]));
        continue;
      }
      if (begin > emitted) out.push_back(piece.substr(emitted, begin - emitted));
      out.push_back(piece.substr(begin, end - begin));
      emitted = pos = end;
    }
    if (emitted < piece.size()) out.push_back(piece.substr(emitted));
  }

  pcre2_match_data* new_match_data() const {
    return pcre2_match_data_create_from_pattern(code_, nullptr);
  }

 private:
  explicit CompiledRegex(pcre2_code* code) : code_(code) {}
  pcre2_code* code_;
};

namespace {

// GPT-2's regex as llama.cpp uses it (the original ends in "|\s+"; a lone whitespace that
// this misses becomes an unmatched piece of its own, which splits the same way).
constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
// Llama-3's regex with "(?i:'s|...)" spelled out case by case, as llama.cpp does.
constexpr std::string_view kLlama3Regex =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen2: Llama-3's regex with single digits.
constexpr std::string_view kQwen2Regex =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen3.5: Qwen2's regex with combining marks (\p{M}) kept inside letter runs.
constexpr std::string_view kQwen35Regex =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kSingleDigitRegex = R"(\p{N})";
// Gemma 4 (SentencePiece-style BPE): no word split, only runs of newlines apart.
constexpr std::string_view kNewlineRunsRegex = R"([^\n]+|[\n]+)";

struct PretokenizerSpec {
  std::vector<std::string_view> names;
  std::vector<std::string_view> regexes;
  bool ignore_merges = false;
  bool default_add_bos = false;
  bool spm_style = false;
};

const std::vector<PretokenizerSpec>& pretokenizer_specs() {
  static const auto* specs = new std::vector<PretokenizerSpec>{
      {{"gpt-2", "gpt2", "phi-2", "mpt", "olmo"}, {kGpt2Regex}},
      {{"smollm", "starcoder", "refact", "codeshell"}, {kSingleDigitRegex, kGpt2Regex}},
      {{"llama3", "llama-v3", "llama-bpe"}, {kLlama3Regex}, true, true},
      {{"qwen2", "deepseek-r1-qwen"}, {kQwen2Regex}},
      {{"qwen35"}, {kQwen35Regex}},
      {{"gemma4"}, {kNewlineRunsRegex}, false, true, true},
  };
  return *specs;
}

std::string supported_names() {
  std::string out;
  for (const PretokenizerSpec& spec : pretokenizer_specs()) {
    for (std::string_view name : spec.names) absl::StrAppend(&out, out.empty() ? "" : ", ", to_absl(name));
  }
  return out;
}

}  // namespace

absl::StatusOr<Pretokenizer> Pretokenizer::create(std::string_view pre_name) {
  for (const PretokenizerSpec& spec : pretokenizer_specs()) {
    for (std::string_view name : spec.names) {
      if (name != pre_name) continue;
      Pretokenizer p;
      p.name_ = std::string(pre_name);
      p.ignore_merges_ = spec.ignore_merges;
      p.default_add_bos_ = spec.default_add_bos;
      p.spm_style_ = spec.spm_style;
      for (std::string_view pattern : spec.regexes) {
        ASSIGN_OR_RETURN(std::shared_ptr<const CompiledRegex> re,
                         CompiledRegex::compile(pattern));
        p.regexes_.push_back(std::move(re));
      }
      return p;
    }
  }
  if (pre_name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer: tokenizer.ggml.pre is missing; a byte-level BPE vocabulary needs one of: ",
        supported_names()));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("tokenizer: pre-tokenizer tokenizer.ggml.pre = '", to_absl(pre_name),
                   "' is not supported (supported: ", supported_names(), ")"));
}

std::vector<std::string_view> Pretokenizer::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  if (text.empty()) return pieces;
  pieces.push_back(text);
  for (const auto& re : regexes_) {
    pcre2_match_data* match = re->new_match_data();
    std::vector<std::string_view> next;
    next.reserve(pieces.size() * 2);
    for (std::string_view piece : pieces) re->split(piece, match, next);
    pcre2_match_data_free(match);
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace flashserve::model
