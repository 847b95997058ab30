// Command-line validators whose messages read as a person would write them (CLI11's own
// PositiveNumber reports "Value 0 not in range 0.000000 to 1.79e308").
#pragma once

#include <CLI/CLI.hpp>

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

}  // namespace hetplan::cli
