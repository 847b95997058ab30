#include "costmodel/errors.h"

namespace hetplan {
namespace {

std::string format_input_error(const std::string& origin, const std::string& key_path,
                               const std::string& expected) {
  std::string out = origin.empty() ? std::string("input") : origin;
  if (!key_path.empty()) out += ": " + key_path;
  return out + ": " + expected;
}

}  // namespace

InputError::InputError(std::string origin, std::string key_path,
                       const std::string& what_was_expected)
    : std::runtime_error(format_input_error(origin, key_path, what_was_expected)),
      origin_(std::move(origin)),
      key_path_(std::move(key_path)) {}

InputError::InputError(const std::string& message) : std::runtime_error(message) {}

}  // namespace hetplan
