#include "model/text/spm_tokenizer.h"

#include <queue>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "base/status_macros.h"
#include "model/text/utf8.h"

namespace flashserve::model {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 '▁'

struct Piece {
  size_t begin;  // byte offset in the escaped text
  size_t size;   // 0 once merged into its left neighbour
  int32_t prev;
  int32_t next;
};

struct Candidate {
  float score;
  int32_t left;
  int32_t right;
  size_t size;  // bytes of the concatenation when queued
  // Highest score first, then leftmost (std::priority_queue pops the "largest").
  bool operator<(const Candidate& o) const {
    return score != o.score ? score < o.score : left > o.left;
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<SpmTokenizer>> SpmTokenizer::create(TokenizerVocab vocab) {
  std::unique_ptr<SpmTokenizer> t(new SpmTokenizer());
  t->add_space_prefix_ = vocab.add_space_prefix.value_or(true);
  RETURN_IF_ERROR(t->init_base(std::move(vocab), /*default_add_bos=*/true));
  RETURN_IF_ERROR(t->build_tables());
  return t;
}

absl::Status SpmTokenizer::build_tables() {
  token_bytes_.resize(vocab_size());
  for (int32_t id = 0; id < vocab_size(); ++id) {
    const std::string& text = vocab_.tokens[id];
    switch (type_of(id)) {
      case TokenType::kNormal:
        token_bytes_[id] = absl::StrReplaceAll(text, {{to_absl(kSpace), " "}});
        break;
      case TokenType::kByte: {
        const int byte = parse_byte_token(text);
        if (byte < 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "tokenizer: byte token ", id, " '", text, "' is not of the form <0xAB>"));
        }
        token_bytes_[id] = std::string(1, static_cast<char>(byte));
        break;
      }
      case TokenType::kControl:
      case TokenType::kUnknown:
      case TokenType::kUserDefined:
        token_bytes_[id] = text;
        break;
      case TokenType::kUnused:
      case TokenType::kUndefined:
        break;  // stands for nothing
    }
  }
  for (int b = 0; b < 256; ++b) {
    int32_t id = find_token(absl::StrFormat("<0x%02X>", b));
    if (id < 0) id = find_token(std::string(1, static_cast<char>(b)));
    byte_token_[b] = id;
  }
  return absl::OkStatus();
}

std::string SpmTokenizer::token_bytes(int32_t id) const {
  return valid_id(id) ? token_bytes_[id] : std::string();
}

std::string SpmTokenizer::first_token_bytes(int32_t id) const {
  std::string bytes = token_bytes(id);
  if (add_space_prefix_ && type_of(id) == TokenType::kNormal && bytes.starts_with(' ')) {
    bytes.erase(0, 1);
  }
  return bytes;
}

void SpmTokenizer::encode_fragment(std::string_view text, bool after_special,
                                   std::vector<int32_t>& out) const {
  std::string escaped = (add_space_prefix_ && after_special) ? std::string(kSpace) : "";
  escaped += absl::StrReplaceAll(to_absl(text), {{" ", to_absl(kSpace)}});

  std::vector<Piece> pieces;
  for (size_t pos = 0; pos < escaped.size();) {
    const size_t len = std::min<size_t>(utf8_sequence_length(escaped[pos]), escaped.size() - pos);
    const auto index = static_cast<int32_t>(pieces.size());
    pieces.push_back({pos, len, index - 1, pos + len < escaped.size() ? index + 1 : -1});
    pos += len;
  }
  std::priority_queue<Candidate> queue;
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const size_t size = pieces[left].size + pieces[right].size;
    const int32_t id = find_token(std::string_view(escaped).substr(pieces[left].begin, size));
    if (id < 0) return;
    queue.push({vocab_.scores[id], left, right, size});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(pieces.size()); ++i) consider(i, i + 1);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Piece& l = pieces[c.left];
    Piece& r = pieces[c.right];
    if (l.size == 0 || r.size == 0 || l.size + r.size != c.size) continue;  // stale
    l.size += r.size;
    r.size = 0;
    l.next = r.next;
    if (r.next >= 0) pieces[r.next].prev = c.left;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }
  for (int32_t i = pieces.empty() ? -1 : 0; i >= 0; i = pieces[i].next) {
    emit_piece(std::string_view(escaped).substr(pieces[i].begin, pieces[i].size), out);
  }
}

void SpmTokenizer::emit_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (int32_t id = find_token(piece); id >= 0) {
    out.push_back(id);
    return;
  }
  for (char c : piece) {
    const int32_t id = byte_token_[static_cast<unsigned char>(c)];
    if (id >= 0) {
      out.push_back(id);
    } else if (vocab_.unk_id >= 0) {
      out.push_back(vocab_.unk_id);
    }
  }
}

}  // namespace flashserve::model
