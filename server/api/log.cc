#include "server/api/log.h"

#include <chrono>
#include <ctime>

#include "absl/strings/str_format.h"

namespace flashserve::api {
namespace {

std::string_view level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "info";
}

// A JSON string literal: quotes, backslashes and control characters escaped.
std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

// A field's value: numbers as numbers; strings quoted in JSON, and in text only when they
// contain a space, a quote or an equals sign.
std::string value_text(const LogField& field, bool json) {
  if (const auto* s = std::get_if<std::string_view>(&field.value)) {
    const bool plain = !s->empty() && s->find_first_of(" \"=\n") == std::string_view::npos;
    return json || !plain ? json_string(*s) : std::string(*s);
  }
  if (const auto* i = std::get_if<int64_t>(&field.value)) return std::to_string(*i);
  return absl::StrFormat("%.6g", std::get<double>(field.value));
}

std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(
                          now.time_since_epoch()).count() % 1000;
  std::tm tm;
  gmtime_r(&seconds, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
  return absl::StrFormat("%s.%03dZ", stamp, static_cast<int>(millis));
}

}  // namespace

absl::StatusOr<LogFormat> parse_log_format(std::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError("--log-format: '" + std::string(name) +
                                    "' is not one of text, json");
}

std::string Logger::format_line(std::string_view time, LogLevel level, std::string_view message,
                                std::initializer_list<LogField> fields) const {
  // std::string appends: this Abseil's StrCat does not take std::string_view.
  std::string line;
  if (format_ == LogFormat::kJson) {
    line.append("{\"time\":").append(json_string(time));
    line.append(",\"level\":").append(json_string(level_name(level)));
    line.append(",\"msg\":").append(json_string(message));
    for (const LogField& f : fields) {
      line.append(",").append(json_string(f.key)).append(":");
      line.append(value_text(f, /*json=*/true));
    }
    return line + "}";
  }
  line.append(time).append(" flashserve: ").append(level_name(level)).append(": ");
  line.append(message);
  for (const LogField& f : fields) {
    line.append(" ").append(f.key).append("=").append(value_text(f, /*json=*/false));
  }
  return line;
}

const Logger& default_logger() {
  static const Logger* const logger = new Logger(LogFormat::kText, stderr);
  return *logger;
}

void Logger::log(LogLevel level, std::string_view message,
                 std::initializer_list<LogField> fields) const {
  const std::string line = format_line(utc_now(), level, message, fields) + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

}  // namespace flashserve::api
