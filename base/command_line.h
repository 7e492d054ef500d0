#pragma once
// The one way flashserve's binaries read their command lines: Abseil flags (ABSL_FLAG next to
// the main that uses them), spelled with dashes as the docs write them (--max-num-seqs) while
// Abseil's names use underscores. Header-only; a binary that calls parse_command_line() links
// absl::flags_parse and absl::flags_usage.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/string_view.h"

namespace flashserve {

// argv with the dashes of every "--flag" name (up to any '=') turned into underscores.
inline std::vector<std::string> dashes_to_underscores(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (std::string& a : args) {
    if (a.rfind("--", 0) != 0) continue;
    const size_t end = std::min(a.find('='), a.size());
    for (size_t i = 2; i < end; ++i) {
      if (a[i] == '-') a[i] = '_';
    }
  }
  return args;
}

// The program's name as parse_command_line() found it in argv[0] (without its folder).
inline std::string& program_name() {
  static std::string name = "flashserve";
  return name;
}

// Prints "PROGRAM: ERROR" and the usage message to stderr and exits with code 2 (what a bad
// command line gets from every binary).
[[noreturn]] inline void exit_with_usage(absl::string_view error) {
  std::fprintf(stderr, "%s: %.*s\nusage: %s %s\n", program_name().c_str(),
               static_cast<int>(error.size()), error.data(), program_name().c_str(),
               std::string(absl::ProgramUsageMessage()).c_str());
  std::exit(2);
}

// Sets the usage message (the arguments after the program name), then absl::ParseCommandLine
// over dashes_to_underscores(argc, argv): sets every flag given; exits with the usage on an
// unknown flag, a malformed value or a positional argument (and on --help / --version).
inline void parse_command_line(int argc, char** argv, absl::string_view usage) {
  if (argc > 0) {
    const std::string path = argv[0];
    program_name() = path.substr(path.find_last_of('/') + 1);
  }
  absl::SetProgramUsageMessage(usage);
  std::vector<std::string> args = dashes_to_underscores(argc, argv);
  std::vector<char*> pointers;
  for (std::string& a : args) pointers.push_back(a.data());
  const std::vector<char*> positional =
      absl::ParseCommandLine(static_cast<int>(pointers.size()), pointers.data());
  if (positional.size() > 1) {
    exit_with_usage(std::string("unexpected argument '") + positional[1] + "'");
  }
}

}  // namespace flashserve
