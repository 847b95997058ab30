// Small helpers shared by tests: substring checks, the message of the InputError a call throws,
// and runs of device indices.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

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

// The integers from `from` up to `to` (not included): a run of device indices.
inline std::vector<int64_t> range(int64_t from, int64_t to) {
  std::vector<int64_t> out;
  for (int64_t i = from; i < to; ++i) out.push_back(i);
  return out;
}

}  // namespace hetplan::testing
