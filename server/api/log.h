#pragma once
// The server's log: one line per event on stderr (or the given stream), as text for people or
// as JSON for log pipelines (`--log-format json`), with a level and optional fields.
//
//   text:  2026-12-01T09:30:00.123Z flashserve: info: listening on 0.0.0.0:50051 (gRPC)
//          2026-12-01T09:30:01.456Z flashserve: info: access method=Generate request_id=7 ...
//   json:  {"time":"2026-12-01T09:30:00.123Z","level":"info","msg":"access","method":...}
//
// Thread-safety: log() may be called from any thread; each line is written whole.
#include <cstdio>
#include <initializer_list>
#include <mutex>
#include <string>
#include <string_view>
#include <variant>

#include "absl/status/statusor.h"

namespace flashserve::api {

enum class LogFormat { kText, kJson };
enum class LogLevel { kInfo, kWarning, kError };

// "text" or "json"; InvalidArgument naming the value otherwise.
absl::StatusOr<LogFormat> parse_log_format(std::string_view name);

struct LogField {
  std::string_view key;
  std::variant<std::string_view, int64_t, double> value;
};

class Logger {
 public:
  explicit Logger(LogFormat format = LogFormat::kText, std::FILE* out = stderr)
      : format_(format), out_(out) {}

  void log(LogLevel level, std::string_view message,
           std::initializer_list<LogField> fields = {}) const;
  void info(std::string_view message, std::initializer_list<LogField> fields = {}) const {
    log(LogLevel::kInfo, message, fields);
  }
  void error(std::string_view message, std::initializer_list<LogField> fields = {}) const {
    log(LogLevel::kError, message, fields);
  }

  // The line log() writes, without the trailing newline (`time` is the timestamp text).
  std::string format_line(std::string_view time, LogLevel level, std::string_view message,
                          std::initializer_list<LogField> fields) const;

 private:
  const LogFormat format_;
  std::FILE* const out_;
  mutable std::mutex mu_;
};

// A text logger on stderr that lives as long as the process: where lines go when no logger
// was configured (ServerOptions::logger unset, before --log-format is parsed).
const Logger& default_logger();

}  // namespace flashserve::api
