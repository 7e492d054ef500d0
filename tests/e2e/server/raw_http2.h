#pragma once
// A raw HTTP/2 client on a plain TCP socket (RFC 9113 frames, RFC 7541 HPACK literals only):
// just enough to send what a hostile client sends — streams reset as soon as they are opened,
// endless CONTINUATION frames, floods of SETTINGS or PING frames — which no well-behaved
// library client will. A reader thread drains and parses what the server sends (so that the
// server never blocks on us) and records its GOAWAY.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace flashserve::e2e {

enum class FrameType : uint8_t {
  kHeaders = 1,
  kRstStream = 3,
  kSettings = 4,
  kPing = 6,
  kGoaway = 7,
  kContinuation = 9,
};
inline constexpr uint8_t kEndStream = 0x1;
inline constexpr uint8_t kEndHeaders = 0x4;
inline constexpr uint8_t kAck = 0x1;  // SETTINGS and PING
inline constexpr uint32_t kCancel = 0x8;             // RST_STREAM error code
inline constexpr uint32_t kEnhanceYourCalm = 0xb;    // GOAWAY error code

// An HPACK integer with an `prefix_bits`-bit prefix; `first` holds the bits above the prefix.
inline std::string hpack_integer(uint64_t value, int prefix_bits, uint8_t first = 0) {
  const uint64_t max_prefix = (uint64_t{1} << prefix_bits) - 1;
  std::string out;
  if (value < max_prefix) {
    out.push_back(static_cast<char>(first | value));
    return out;
  }
  out.push_back(static_cast<char>(first | max_prefix));
  value -= max_prefix;
  while (value >= 128) {
    out.push_back(static_cast<char>(0x80 | (value & 0x7f)));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
  return out;
}

// A literal header field without indexing, new name, no Huffman coding.
inline std::string hpack_literal(const std::string& name, const std::string& value) {
  return std::string(1, '\0') + hpack_integer(name.size(), 7) + name +
         hpack_integer(value.size(), 7) + value;
}

// The header block of a gRPC call of `path` (unary or streaming: the same headers).
inline std::string grpc_request_headers(const std::string& path, const std::string& authority) {
  return hpack_literal(":method", "POST") + hpack_literal(":scheme", "http") +
         hpack_literal(":path", path) + hpack_literal(":authority", authority) +
         hpack_literal("content-type", "application/grpc") + hpack_literal("te", "trailers");
}

class RawHttp2Connection {
 public:
  // Connects to 127.0.0.1:port and sends the client preface and an empty SETTINGS frame.
  explicit RawHttp2Connection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      return;
    }
    // A server that stops reading (it refuses what we send without closing) fails our sends
    // after this long instead of blocking the test.
    const timeval send_timeout{2, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
    reader_ = std::thread([this] { read_loop(); });
    ok_ = send_raw("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") && send(FrameType::kSettings, 0, 0, "");
  }
  ~RawHttp2Connection() {
    close();
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return ok_; }
  // Goes away: shuts the socket down (the server sees the connection end) and stops reading.
  void close() {
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
    if (reader_.joinable()) reader_.join();
  }

  // False once the server has closed the connection, or has read nothing for 2 s.
  bool send(FrameType type, uint8_t flags, uint32_t stream_id, const std::string& payload) {
    std::string frame;
    const uint32_t length = static_cast<uint32_t>(payload.size());
    frame.push_back(static_cast<char>(length >> 16));
    frame.push_back(static_cast<char>(length >> 8));
    frame.push_back(static_cast<char>(length));
    frame.push_back(static_cast<char>(type));
    frame.push_back(static_cast<char>(flags));
    for (int shift = 24; shift >= 0; shift -= 8) {
      frame.push_back(static_cast<char>((stream_id >> shift) & (shift == 24 ? 0x7f : 0xff)));
    }
    return send_raw(frame + payload);
  }
  static std::string u32(uint32_t v) {
    return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
            static_cast<char>(v)};
  }

  // Waits up to `timeout` for the server to close the connection; true when it did.
  bool wait_closed(std::chrono::milliseconds timeout) {
    const auto give_up = std::chrono::steady_clock::now() + timeout;
    while (!closed_.load() && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return closed_.load();
  }
  // Sends a PING and waits up to `timeout` for its ACK: the server has parsed every frame sent
  // before it (frames are read in order).
  bool ping_acked(std::chrono::milliseconds timeout) {
    const int64_t before = num_ping_acks_.load();
    if (!send(FrameType::kPing, 0, 0, std::string(8, 'a'))) return false;
    const auto give_up = std::chrono::steady_clock::now() + timeout;
    while (num_ping_acks_.load() == before && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return num_ping_acks_.load() > before;
  }
  bool got_goaway() const { return goaway_.load(); }
  // The GOAWAY's error code and debug data (valid once got_goaway()).
  std::pair<uint32_t, std::string> goaway() {
    std::lock_guard<std::mutex> lock(mu_);
    return {goaway_code_, goaway_debug_};
  }
  int64_t frames_received() const { return num_frames_.load(); }

 private:
  bool send_raw(const std::string& bytes) {
    return send_all(fd_, bytes);
  }

  void read_loop() {
    std::string buffer;
    char chunk[65536];
    for (;;) {
      const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
      if (n <= 0) break;
      buffer.append(chunk, static_cast<size_t>(n));
      parse(&buffer);
    }
    closed_.store(true);
  }

  void parse(std::string* buffer) {
    while (buffer->size() >= 9) {
      const auto* b = reinterpret_cast<const uint8_t*>(buffer->data());
      const size_t length = (size_t{b[0]} << 16) | (size_t{b[1]} << 8) | b[2];
      if (buffer->size() < 9 + length) return;
      if (b[3] == static_cast<uint8_t>(FrameType::kGoaway) && length >= 8) {
        std::lock_guard<std::mutex> lock(mu_);
        goaway_code_ = (uint32_t{b[13]} << 24) | (uint32_t{b[14]} << 16) |
                       (uint32_t{b[15]} << 8) | b[16];
        goaway_debug_ = buffer->substr(17, length - 8);
        goaway_.store(true);
      }
      if (b[3] == static_cast<uint8_t>(FrameType::kPing) && (b[4] & kAck) != 0) ++num_ping_acks_;
      ++num_frames_;
      buffer->erase(0, 9 + length);
    }
  }

  int fd_ = -1;
  bool ok_ = false;
  std::thread reader_;
  std::atomic<bool> closed_{false};
  std::atomic<bool> goaway_{false};
  std::atomic<int64_t> num_frames_{0};
  std::atomic<int64_t> num_ping_acks_{0};
  std::mutex mu_;
  uint32_t goaway_code_ = 0;   // guarded by mu_
  std::string goaway_debug_;   // guarded by mu_
};

}  // namespace flashserve::e2e
