#include "server/api/raw_messages.h"

#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/logging.h"

namespace flashserve::api {
namespace {

// Set while this thread parses a request: protobuf's complaint goes here, not to the log.
thread_local std::string* t_capture = nullptr;

// Where the lines go (route_protobuf_log); null = default_logger().
std::atomic<const Logger*> g_logger{nullptr};

const Logger& logger() {
  const Logger* l = g_logger.load();
  return l != nullptr ? *l : default_logger();
}

struct LogState {
  std::mutex mu;
  std::chrono::steady_clock::time_point last_print{};
  bool printed_once = false;
  int64_t printed = 0;
  int64_t suppressed = 0;
  int64_t suppressed_since_print = 0;
};

LogState& log_state() {
  static LogState* state = new LogState();
  return *state;
}

const char* level_name(google::protobuf::LogLevel level) {
  switch (level) {
    case google::protobuf::LOGLEVEL_INFO: return "INFO";
    case google::protobuf::LOGLEVEL_WARNING: return "WARNING";
    case google::protobuf::LOGLEVEL_ERROR: return "ERROR";
    case google::protobuf::LOGLEVEL_FATAL: return "FATAL";
  }
  return "?";
}

void rate_limited_log(google::protobuf::LogLevel level, const char* filename, int line,
                      const std::string& message) {
  if (t_capture != nullptr && level != google::protobuf::LOGLEVEL_FATAL) {
    if (t_capture->empty()) *t_capture = message;
    return;
  }
  if (level == google::protobuf::LOGLEVEL_FATAL) {  // never rate-limited
    logger().error(absl::StrCat("[libprotobuf FATAL ", filename, ":", line, "] ", message));
    return;
  }
  log_rate_limited(absl::StrCat("[libprotobuf ", level_name(level), " ", filename, ":", line,
                                "] ", message));
}

}  // namespace

absl::Status parse_request(const grpc::ByteBuffer& bytes, google::protobuf::Message* message) {
  install_protobuf_log_handler();  // protobuf tells why a parse failed only through its log
  std::vector<grpc::Slice> slices;
  std::string data;
  if (!bytes.Dump(&slices).ok()) {
    return absl::InvalidArgumentError("request: the message bytes cannot be read");
  }
  for (const grpc::Slice& slice : slices) {
    data.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  std::string reason;
  t_capture = &reason;
  const bool ok = message->ParseFromString(data);
  t_capture = nullptr;
  if (ok) return absl::OkStatus();
  if (reason.empty()) reason = "truncated or malformed protobuf wire data";
  return absl::InvalidArgumentError(absl::StrCat("request: not a valid ",
                                                 message->GetDescriptor()->full_name(), " (",
                                                 data.size(), " bytes): ", reason));
}

grpc::ByteBuffer to_byte_buffer(const google::protobuf::Message& message) {
  const std::string data = message.SerializeAsString();
  grpc::Slice slice(data);
  return grpc::ByteBuffer(&slice, 1);
}

void log_rate_limited(const std::string& line) {
  LogState& s = log_state();
  std::lock_guard<std::mutex> lock(s.mu);
  const auto now = std::chrono::steady_clock::now();
  if (s.printed_once && now - s.last_print < kLogInterval) {
    ++s.suppressed;
    ++s.suppressed_since_print;
    return;
  }
  std::string suffix;
  if (s.suppressed_since_print > 0) {
    suffix = absl::StrCat(" (", s.suppressed_since_print, " similar lines suppressed in the last ",
                          kLogInterval.count(), " s)");
  }
  logger().log(LogLevel::kWarning, absl::StrCat(line, suffix));
  s.printed_once = true;
  s.last_print = now;
  s.suppressed_since_print = 0;
  ++s.printed;
}

void route_protobuf_log(const Logger* logger) { g_logger.store(logger); }

void install_protobuf_log_handler() {
  static std::once_flag once;
  std::call_once(once, [] { google::protobuf::SetLogHandler(&rate_limited_log); });
}

ProtobufLogCounts protobuf_log_counts() {
  LogState& s = log_state();
  std::lock_guard<std::mutex> lock(s.mu);
  return {s.printed, s.suppressed};
}

}  // namespace flashserve::api
