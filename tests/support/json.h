#pragma once
// Reading the JSON golden files under tests/data (nlohmann-json, Debian's
// nlohmann-json3-dev) and the hex strings they use for raw bytes.
#include <fstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace flashserve::testing {

using Json = nlohmann::json;

// The parsed file; throws std::runtime_error naming the path when it cannot be opened or
// parsed (tests only: nothing crosses a module boundary).
inline Json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("json: cannot open " + path);
  try {
    return Json::parse(in);
  } catch (const Json::exception& e) {
    throw std::runtime_error("json: " + path + ": " + e.what());
  }
}

// "41c3a9" -> "A\xC3\xA9". Throws std::invalid_argument on a non-hex digit.
inline std::string from_hex(const std::string& hex) {
  if (hex.size() % 2 != 0) throw std::invalid_argument("hex: odd length " + hex);
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  return out;
}

}  // namespace flashserve::testing
