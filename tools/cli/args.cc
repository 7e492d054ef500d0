#include "tools/cli/args.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace flashserve::cli {

absl::StatusOr<Args> Args::parse(const std::vector<std::string>& argv, const FlagSpec& spec) {
  Args args;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "'"));
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    if (spec.booleans.count(name)) {
      if (value) return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
      args.values_[name].push_back("true");
      continue;
    }
    if (!spec.with_value.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    if (!value) {
      if (i + 1 >= argv.size()) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
      value = argv[++i];
    }
    args.values_[name].push_back(*value);
  }
  return args;
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second.back();
}

std::vector<std::string> Args::get_all(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

absl::StatusOr<std::optional<int>> Args::get_optional_int(const std::string& name) const {
  if (!has(name)) return std::optional<int>();
  int value = 0;
  if (!absl::SimpleAtoi(get(name), &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": '", get(name), "' is not an integer"));
  }
  return std::optional<int>(value);
}

absl::StatusOr<std::optional<double>> Args::get_optional_double(const std::string& name) const {
  if (!has(name)) return std::optional<double>();
  double value = 0;
  if (!absl::SimpleAtod(get(name), &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": '", get(name), "' is not a number"));
  }
  return std::optional<double>(value);
}

absl::StatusOr<int> Args::get_int(const std::string& name, int fallback) const {
  ASSIGN_OR_RETURN(const std::optional<int> value, get_optional_int(name));
  return value.value_or(fallback);
}

absl::StatusOr<double> Args::get_double(const std::string& name, double fallback) const {
  ASSIGN_OR_RETURN(const std::optional<double> value, get_optional_double(name));
  return value.value_or(fallback);
}

}  // namespace flashserve::cli
