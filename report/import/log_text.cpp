#include "report/import/log_text.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "costmodel/errors.h"

namespace hetplan::logs {

std::string read_text_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string(), "", "cannot open the file (does it exist?)");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

namespace {

// "[default0]:", "[rank12]:" (torchrun --tee / --log-line-prefix) or "3: " (srun --label).
std::string_view strip_launcher_prefix(std::string_view s) {
  if (!s.empty() && s[0] == '[') {
    const size_t close = s.find("]:");
    if (close != std::string_view::npos && close < 16) {
      const std::string_view tag = s.substr(1, close - 1);
      const bool plain = !tag.empty() && tag.find(' ') == std::string_view::npos &&
                         std::isdigit(static_cast<unsigned char>(tag.back()));
      if (plain) return s.substr(close + 2);
    }
  }
  size_t digits = 0;
  while (digits < s.size() && digits < 6 && std::isdigit(static_cast<unsigned char>(s[digits])))
    ++digits;
  if (digits > 0 && digits + 1 < s.size() && s[digits] == ':' && s[digits + 1] == ' ')
    return s.substr(digits + 2);
  return s;
}

}  // namespace

std::vector<Line> split_lines(std::string_view text) {
  std::vector<Line> out;
  int64_t number = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.push_back({strip_launcher_prefix(line), ++number});
    start = end + 1;
  }
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

std::optional<double> parse_number(std::string_view text) {
  text = trim(text);
  if (text.empty()) return std::nullopt;
  if (text.front() == '+') text.remove_prefix(1);
  double v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  // from_chars reads "nan" and "inf": no time, size or rate a log or table gives is one of them.
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<int64_t> parse_integer(std::string_view text) {
  text = trim(text);
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  return v;
}

int64_t integer_at(std::string_view text, std::string_view what, const std::string& origin,
                   int64_t line) {
  const auto v = parse_integer(text);
  if (!v)
    fail_at(origin, line,
            fmt::format("{}: expected a whole number within +-9.2e18, found \"{}\"", what, text));
  return *v;
}

std::vector<std::pair<std::string, std::string>> pipe_fields(std::string_view line) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t start = 0;
  while (start <= line.size()) {
    size_t end = line.find('|', start);
    if (end == std::string_view::npos) end = line.size();
    const std::string_view piece = line.substr(start, end - start);
    const size_t colon = piece.rfind(':');
    if (colon != std::string_view::npos)
      out.emplace_back(std::string(trim(piece.substr(0, colon))),
                       std::string(trim(piece.substr(colon + 1))));
    start = end + 1;
  }
  return out;
}

void fail_at(const std::string& origin, int64_t line, const std::string& what) {
  throw InputError(fmt::format("{}:{}", origin, line), "", what);
}

}  // namespace hetplan::logs
