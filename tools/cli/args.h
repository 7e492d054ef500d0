#pragma once
// A small command-line parser for flashserve-cli: `--name value`, `--name=value`, boolean
// `--name`, and repeatable flags. Unknown flags and malformed numbers are errors that name the
// flag, so typos never silently fall back to defaults.
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace flashserve::cli {

struct FlagSpec {
  std::set<std::string> with_value;  // flags that take a value (repeatable)
  std::set<std::string> booleans;    // flags without a value
};

class Args {
 public:
  // Parses `argv` (without the program/command name) against `spec`. Positional arguments
  // are not accepted.
  static absl::StatusOr<Args> parse(const std::vector<std::string>& argv, const FlagSpec& spec);

  bool has(const std::string& name) const { return values_.count(name) > 0; }
  // The last value given for `name`, or `fallback`.
  std::string get(const std::string& name, const std::string& fallback = "") const;
  // Every value given for a repeatable flag, in order.
  std::vector<std::string> get_all(const std::string& name) const;
  absl::StatusOr<int> get_int(const std::string& name, int fallback) const;
  absl::StatusOr<double> get_double(const std::string& name, double fallback) const;
  // Unset when the flag is absent.
  absl::StatusOr<std::optional<double>> get_optional_double(const std::string& name) const;
  absl::StatusOr<std::optional<int>> get_optional_int(const std::string& name) const;

 private:
  std::map<std::string, std::vector<std::string>> values_;
};

}  // namespace flashserve::cli
