// Error types of the hetplan libraries. Library code throws these; only cli/ maps them to exit
// codes (InputError -> 2, RuntimeFailure -> 1).
#pragma once

#include <stdexcept>
#include <string>

namespace hetplan {

// Bad user input. The message names the file, the key path inside it and what was expected.
class InputError : public std::runtime_error {
 public:
  InputError(std::string origin, std::string key_path, const std::string& what_was_expected);
  // Input error that is not tied to a file (a command-line value, say).
  explicit InputError(const std::string& message);

  const std::string& origin() const { return origin_; }
  const std::string& key_path() const { return key_path_; }

 private:
  std::string origin_;
  std::string key_path_;
};

// A failure at run time that is not the user's input: no GPU, a solver that failed, a lost rank.
class RuntimeFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace hetplan
