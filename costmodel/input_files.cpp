#include "costmodel/input_files.h"

#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "costmodel/errors.h"

namespace hetplan {
namespace {

std::optional<std::string> regular_file_bytes(const std::filesystem::path& p) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec)) return std::nullopt;
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  std::error_code ec;
  const bool same = std::filesystem::equivalent(a, b, ec);
  return !ec && same;
}

}  // namespace

std::vector<RepeatedInput> repeated_inputs(const std::vector<std::filesystem::path>& files) {
  std::vector<RepeatedInput> out;
  std::vector<std::filesystem::path> kept;
  std::multimap<size_t, size_t> by_hash;  // content hash -> index into kept
  std::vector<std::string> contents;      // of kept, "" where not a regular file
  for (size_t i = 0; i < files.size(); ++i) {
    const std::filesystem::path& f = files[i];
    std::optional<RepeatedInput> repeat;
    for (const auto& k : kept)
      if (same_file(f, k) || f.lexically_normal() == k.lexically_normal()) {
        repeat = RepeatedInput{f, k, true, i};
        break;
      }
    const std::optional<std::string> bytes = repeat ? std::nullopt : regular_file_bytes(f);
    if (bytes) {
      const size_t h = std::hash<std::string>{}(*bytes);
      for (auto [it, end] = by_hash.equal_range(h); it != end && !repeat; ++it)
        if (contents[it->second] == *bytes) repeat = RepeatedInput{f, kept[it->second], false, i};
      if (!repeat) by_hash.emplace(h, kept.size());
    }
    if (repeat) {
      out.push_back(*repeat);
      continue;
    }
    kept.push_back(f);
    contents.push_back(bytes.value_or(""));
  }
  return out;
}

std::string describe(const RepeatedInput& r) {
  return fmt::format("{}: the same {} as {}", r.path.string(), r.same_file ? "file" : "content",
                     r.first.string());
}

void require_distinct_inputs(const std::vector<std::filesystem::path>& files) {
  const auto repeats = repeated_inputs(files);
  if (repeats.empty()) return;
  throw InputError(
      fmt::format("{}: an input given twice would count its records twice; give "
                  "each file once",
                  describe(repeats.front())));
}

}  // namespace hetplan
