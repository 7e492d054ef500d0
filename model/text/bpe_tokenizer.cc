#include "model/text/bpe_tokenizer.h"

#include <queue>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "base/status_macros.h"
#include "model/text/utf8.h"

namespace flashserve::model {
namespace {

struct ByteMapping {
  std::array<std::string, 256> to_unicode;
  absl::flat_hash_map<uint32_t, uint8_t> from_unicode;  // code point -> byte
};

// GPT-2's bytes_to_unicode(): bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for
// themselves; the remaining 68 bytes take U+0100, U+0101, ... in byte order.
const ByteMapping& byte_mapping() {
  static const ByteMapping* mapping = [] {
    auto* m = new ByteMapping;
    uint32_t next = 0x100;
    for (uint32_t b = 0; b < 256; ++b) {
      bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      uint32_t cp = printable ? b : next++;
      m->to_unicode[b] = codepoint_to_utf8(cp);
      m->from_unicode[cp] = static_cast<uint8_t>(b);
    }
    return m;
  }();
  return *mapping;
}

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 '▁' (SentencePiece space)

struct Symbol {
  int32_t id;     // symbol id (token id or extra symbol); -1: a character nothing merges with
  int32_t prev;   // index of the previous live symbol, -1 if none
  int32_t next;   // index of the next live symbol, -1 if none
  uint32_t begin; // bytes of the piece this symbol covers
  uint32_t size;
  bool alive;
};

struct Candidate {
  int32_t rank;
  int32_t left;   // symbol index
  int32_t right;  // symbol index
  int32_t left_id;
  int32_t right_id;
  // Lowest rank first, then leftmost (std::priority_queue pops the "largest").
  bool operator<(const Candidate& o) const {
    return rank != o.rank ? rank > o.rank : left > o.left;
  }
};

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

}  // namespace

const std::string& byte_to_unicode(uint8_t byte) { return byte_mapping().to_unicode[byte]; }

bool unicode_to_bytes(std::string_view mapped, std::string& bytes) {
  const auto& from = byte_mapping().from_unicode;
  bytes.clear();
  for (size_t pos = 0; pos < mapped.size();) {
    const auto lead = static_cast<unsigned char>(mapped[pos]);
    size_t len = utf8_sequence_length(lead);
    if (pos + len > mapped.size()) return false;
    uint32_t cp = len == 1 ? lead : (lead & (0xFF >> (len + 1)));
    for (size_t i = 1; i < len; ++i) cp = (cp << 6) | (mapped[pos + i] & 0x3F);
    auto it = from.find(cp);
    if (it == from.end()) return false;
    bytes += static_cast<char>(it->second);
    pos += len;
  }
  return true;
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::create(TokenizerVocab vocab) {
  ASSIGN_OR_RETURN(Pretokenizer pre, Pretokenizer::create(vocab.pre));
  const bool default_add_bos = pre.default_add_bos();
  // As llama.cpp (its "workaround for Gemma 4"): Gemma 4 always starts with BOS.
  if (pre.spm_style()) vocab.add_bos = true;
  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer(std::move(pre)));
  RETURN_IF_ERROR(t->init_base(std::move(vocab), default_add_bos));
  RETURN_IF_ERROR(t->build_tables());
  return t;
}

int32_t BpeTokenizer::intern(std::string bytes) {
  auto it = bytes_to_symbol_.find(bytes);
  if (it != bytes_to_symbol_.end()) return it->second;
  const int32_t id = vocab_size() + static_cast<int32_t>(extra_symbols_.size());
  extra_symbols_.push_back(bytes);
  bytes_to_symbol_.emplace(std::move(bytes), id);
  return id;
}

absl::Status BpeTokenizer::build_tables() {
  const int num_tokens = vocab_size();
  token_bytes_.resize(num_tokens);
  bytes_to_symbol_.reserve(num_tokens + vocab_.merges.size() / 8);
  const bool spm = pretokenizer_.spm_style();
  std::string bytes;
  for (int32_t id = 0; id < num_tokens; ++id) {
    const std::string& text = vocab_.tokens[id];
    const bool decodable = spm ? true : unicode_to_bytes(text, bytes);
    if (spm) bytes = text;  // raw UTF-8, '▁' for a space
    const TokenType type = type_of(id);
    if (spm) {
      RETURN_IF_ERROR(spm_token_bytes(id, text, token_bytes_[id]));
    } else {
      // Normal tokens are byte-mapped; control/user-defined tokens are stored as plain text.
      const bool mapped = type == TokenType::kNormal || type == TokenType::kByte;
      token_bytes_[id] = mapped && decodable ? bytes : text;
    }
    if (type == TokenType::kUnused || type == TokenType::kUndefined) token_bytes_[id].clear();
    // A piece's bytes are looked up as their mapped text, so key every token by the bytes its
    // text maps back to; a text outside the mapping can never be produced by merging.
    if (decodable) bytes_to_symbol_.emplace(bytes, id);
  }
  for (int b = 0; b < 256; ++b) {
    if (spm) {
      byte_symbol_[b] = -1;  // merging starts from characters, not bytes
      byte_fallback_[b] = find_token(absl::StrFormat("<0x%02X>", b));
    } else {
      byte_symbol_[b] = intern(std::string(1, static_cast<char>(b)));
      byte_fallback_[b] = byte_symbol_[b] < num_tokens ? byte_symbol_[b] : -1;
    }
  }
  merges_.reserve(vocab_.merges.size());
  std::string left, right;
  for (size_t rank = 0; rank < vocab_.merges.size(); ++rank) {
    const std::string& merge = vocab_.merges[rank];
    const size_t space = merge.find(' ', 1);
    if (space == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer: merge ", rank, " '", merge,
                                                     "' is not two space-separated parts"));
    }
    if (spm) {
      left = merge.substr(0, space);
      right = merge.substr(space + 1);
    } else if (!unicode_to_bytes(std::string_view(merge).substr(0, space), left) ||
               !unicode_to_bytes(std::string_view(merge).substr(space + 1), right)) {
      continue;  // outside the byte mapping: no piece can ever contain it
    }
    const int32_t l = intern(left), r = intern(right), m = intern(left + right);
    merges_.emplace(pair_key(l, r), Merge{static_cast<int32_t>(rank), m});  // keeps the first
  }
  return absl::OkStatus();
}

std::string BpeTokenizer::token_bytes(int32_t id) const {
  return valid_id(id) ? token_bytes_[id] : std::string();
}

absl::Status BpeTokenizer::spm_token_bytes(int32_t id, const std::string& text,
                                           std::string& bytes) const {
  switch (type_of(id)) {
    case TokenType::kNormal:
      bytes = absl::StrReplaceAll(text, {{to_absl(kSpace), " "}});
      return absl::OkStatus();
    case TokenType::kByte: {
      const int byte = parse_byte_token(text);
      if (byte < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "tokenizer: byte token ", id, " '", text, "' is not of the form <0xAB>"));
      }
      bytes = std::string(1, static_cast<char>(byte));
      return absl::OkStatus();
    }
    default:
      bytes = text;
      return absl::OkStatus();
  }
}

void BpeTokenizer::encode_fragment(std::string_view text, bool /*after_special*/,
                                   std::vector<int32_t>& out) const {
  std::string clean = sanitize_utf8(text);
  if (pretokenizer_.spm_style()) clean = absl::StrReplaceAll(clean, {{" ", to_absl(kSpace)}});
  for (std::string_view piece : pretokenizer_.split(clean)) encode_piece(piece, out);
}

void BpeTokenizer::emit_symbol(int32_t symbol, std::string_view bytes,
                               std::vector<int32_t>& out) const {
  if (symbol >= 0 && symbol < vocab_size()) {
    out.push_back(symbol);
    return;
  }
  for (char c : bytes) {
    const int32_t b = byte_fallback_[static_cast<unsigned char>(c)];
    if (b >= 0) out.push_back(b);  // a vocabulary without the byte drops it
  }
}

namespace {

// The symbols a piece starts from: its bytes (byte-level BPE) or its characters (SPM style,
// where a character that is no token and no part of a merge gets id -1).
std::vector<Symbol> initial_symbols(std::string_view piece, bool spm,
                                    const std::array<int32_t, 256>& byte_symbol,
                                    const absl::flat_hash_map<std::string, int32_t>& symbols_of) {
  std::vector<Symbol> symbols;
  symbols.reserve(piece.size());
  for (uint32_t pos = 0; pos < piece.size();) {
    uint32_t len = 1;
    int32_t id = byte_symbol[static_cast<unsigned char>(piece[pos])];
    if (spm) {
      len = std::min<uint32_t>(utf8_sequence_length(piece[pos]), piece.size() - pos);
      auto it = symbols_of.find(to_absl(piece.substr(pos, len)));
      id = it == symbols_of.end() ? -1 : it->second;
    }
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, pos + len < piece.size() ? index + 1 : -1, pos, len, true});
    pos += len;
  }
  return symbols;
}

}  // namespace

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  // Llama-3: a piece that is a token is not merged; Gemma 4: the same for runs of newlines.
  if (pretokenizer_.ignore_merges() ||
      (pretokenizer_.spm_style() && piece.find_first_not_of('\n') == std::string_view::npos)) {
    auto it = bytes_to_symbol_.find(to_absl(piece));
    if (it != bytes_to_symbol_.end() && it->second < vocab_size()) {
      out.push_back(it->second);
      return;
    }
  }
  std::vector<Symbol> symbols =
      initial_symbols(piece, pretokenizer_.spm_style(), byte_symbol_, bytes_to_symbol_);
  const auto n = static_cast<int32_t>(symbols.size());
  std::priority_queue<Candidate> queue;
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    auto it = merges_.find(pair_key(symbols[left].id, symbols[right].id));
    if (it == merges_.end()) return;
    queue.push({it->second.rank, left, right, symbols[left].id, symbols[right].id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i, i + 1);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& l = symbols[c.left];
    Symbol& r = symbols[c.right];
    // Stale if either side has been merged away or changed since the pair was queued.
    if (!l.alive || !r.alive || l.next != c.right || l.id != c.left_id || r.id != c.right_id) {
      continue;
    }
    l.id = merges_.find(pair_key(c.left_id, c.right_id))->second.merged;
    r.alive = false;
    l.size += r.size;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = c.left;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }
  for (int32_t i = 0; i >= 0 && i < n; i = symbols[i].next) {
    emit_symbol(symbols[i].id, piece.substr(symbols[i].begin, symbols[i].size), out);
  }
}

}  // namespace flashserve::model
