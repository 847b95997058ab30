// Small helpers shared by tests: substring checks, and the message of the InputError a call throws.
#pragma once

#include <functional>
#include <string>

#include "costmodel/errors.h"

namespace hetplan::testing {

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The message of the `Error` (InputError unless said) `f` throws; empty when it throws none.
template <class Error = InputError>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace hetplan::testing
