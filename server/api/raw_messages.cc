#include "server/api/raw_messages.h"

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/logging.h"
#include "grpc/support/log.h"

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

// Rate-limit state of one key of log_rate_limited().
struct KeyState {
  std::chrono::steady_clock::time_point last_print{};
  bool printed_once = false;
  int64_t suppressed_since_print = 0;
};

struct LogState {
  std::mutex mu;
  // Keys are kinds of lines (a fixed text, a library's file:line): a bounded set.
  std::map<std::string, KeyState, std::less<>> keys;
  int64_t printed = 0;
  int64_t suppressed = 0;
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
  log_rate_limited(absl::StrCat("protobuf ", filename, ":", line),
                   absl::StrCat("[libprotobuf ", level_name(level), " ", filename, ":", line,
                                "] ", message));
}

// gRPC's lines (gpr_log; its own minimum severity, GRPC_VERBOSITY, already applied), keyed
// by their source line: a client that fails 200 TLS handshakes gets one line per interval.
void grpc_log(gpr_log_func_args* args) {
  const LogLevel level = args->severity == GPR_LOG_SEVERITY_ERROR ? LogLevel::kError
                                                                  : LogLevel::kInfo;
  const std::string source = absl::StrCat(args->file, ":", args->line);
  log_rate_limited(absl::StrCat("grpc ", source),
                   absl::StrCat("[grpc ", source, "] ", args->message), level);
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

void log_rate_limited(std::string_view key, const std::string& line, LogLevel level) {
  LogState& s = log_state();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.keys.find(key);
  if (it == s.keys.end()) it = s.keys.emplace(std::string(key), KeyState()).first;
  KeyState& k = it->second;
  const auto now = std::chrono::steady_clock::now();
  if (k.printed_once && now - k.last_print < kLogInterval) {
    ++s.suppressed;
    ++k.suppressed_since_print;
    return;
  }
  std::string suffix;
  if (k.suppressed_since_print > 0) {
    suffix = absl::StrCat(" (", k.suppressed_since_print, " similar lines suppressed in the last ",
                          kLogInterval.count(), " s)");
  }
  logger().log(level, absl::StrCat(line, suffix));
  k.printed_once = true;
  k.last_print = now;
  k.suppressed_since_print = 0;
  ++s.printed;
}

void log_rate_limited(const std::string& line) { log_rate_limited("request", line); }

void route_protobuf_log(const Logger* logger) { g_logger.store(logger); }

void install_grpc_log_handler() {
  static std::once_flag once;
  std::call_once(once, [] { gpr_set_log_function(&grpc_log); });
}

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
