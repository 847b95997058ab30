// Command-line validators whose messages read as a person would write them (CLI11's own
// PositiveNumber reports "Value 0 not in range 0.000000 to 1.79e308").
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace hetplan::cli {

// A number greater than zero ("--top: expected a number > 0, got 0").
inline const CLI::Validator kPositive(
    [](std::string& text) -> std::string {
      double v = 0;
      if (!CLI::detail::lexical_cast(text, v) || !(v > 0))
        return "expected a number > 0, got " + text;
      return "";
    },
    "> 0", "POSITIVE");

// A number of zero or more.
inline const CLI::Validator kNonNegative(
    [](std::string& text) -> std::string {
      double v = 0;
      if (!CLI::detail::lexical_cast(text, v) || !(v >= 0))
        return "expected a number >= 0, got " + text;
      return "";
    },
    ">= 0", "NONNEGATIVE");

// A count of worker threads. The cap keeps a typo (--threads 100000) from failing to start its
// threads, which ended the process with std::terminate; no machine hetplan plans on is faster
// with more (--threads is how many candidates or placements are costed at once).
inline constexpr int kMaxThreads = 1024;
inline const CLI::Validator kThreadCount(
    [](std::string& text) -> std::string {
      int64_t v = 0;
      if (!CLI::detail::lexical_cast(text, v) || v < 1 || v > kMaxThreads)
        return "expected a whole number of threads from 1 to " + std::to_string(kMaxThreads) +
               ", got " + text;
      return "";
    },
    "1-1024", "THREADS");

}  // namespace hetplan::cli
