// Small helpers shared by the log importers: reading a log, splitting it into numbered lines,
// stripping launcher prefixes, parsing numbers, and errors that name the file and line.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace hetplan::logs {

struct Line {
  std::string_view text;  // without the newline and without a launcher prefix
  int64_t number = 0;     // 1-based
};

// Reads a whole text file; throws InputError when it cannot be opened.
std::string read_text_file(const std::filesystem::path& path);

// Splits text into lines (LF or CRLF), stripping the prefixes launchers add to every line:
// torchrun's "[default0]:" / "[rank0]:" and srun --label's "0: ".
std::vector<Line> split_lines(std::string_view text);

std::string_view trim(std::string_view s);
bool starts_with(std::string_view s, std::string_view prefix);
bool contains(std::string_view s, std::string_view part);

// The whole (trimmed) text as a finite number; nullopt when it is not one (nan and inf too).
std::optional<double> parse_number(std::string_view text);
std::optional<int64_t> parse_integer(std::string_view text);
// parse_integer of a number a log line holds (the digits a pattern matched, which may overflow),
// else fail_at "<what>: expected a whole number within +-9.2e18, found <text>".
int64_t integer_at(std::string_view text, std::string_view what, const std::string& origin,
                   int64_t line);

// "a: 1 | b c: 2 |" -> {{"a", "1"}, {"b c", "2"}}; pieces without ':' are skipped.
std::vector<std::pair<std::string, std::string>> pipe_fields(std::string_view line);

// Throws InputError "origin:line: what" (the file and line of a malformed log line).
[[noreturn]] void fail_at(const std::string& origin, int64_t line, const std::string& what);

}  // namespace hetplan::logs
