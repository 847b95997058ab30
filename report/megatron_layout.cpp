#include "report/megatron_layout.h"

#include <regex>

#include <fmt/format.h>

namespace hetplan {
namespace {

constexpr size_t kMaxLayoutChars = 100000;

}  // namespace

std::vector<StageBlocks> megatron_stage_split(int64_t blocks, int64_t pp, int64_t first,
                                              int64_t last, const LayoutFail& fail) {
  const int64_t uneven = (first >= 0 ? 1 : 0) + (last >= 0 ? 1 : 0);
  const int64_t rest = blocks - std::max<int64_t>(first, 0) - std::max<int64_t>(last, 0);
  const int64_t middle = pp - uneven;
  if (rest < 0 || (middle == 0 && rest != 0) || (middle > 0 && rest % middle != 0))
    fail(fmt::format("{} layers do not split over {} pipeline stages{}", blocks, pp,
                     uneven ? fmt::format(" with first {} and last {}", first, last) : ""));
  std::vector<int64_t> counts(pp, middle > 0 ? rest / middle : 0);
  if (first >= 0) counts.front() = first;
  if (last >= 0) counts.back() = last;
  return split_by_counts(counts);
}

std::vector<StageBlocks> parse_megatron_layout(const std::string& layout, int64_t pp,
                                               const LayoutFail& fail) {
  std::string s;
  for (char c : layout)
    if (c != ',' && c != ' ' && c != '"' && c != '\'') s += c;
  // Unroll (...)*n, then x*n, as Megatron-LM does.
  for (const std::regex& re : {std::regex(R"(\(([^)]+)\)\*(\d+))"), std::regex(R"((.)\*(\d+))")}) {
    std::smatch m;
    while (std::regex_search(s, m, re)) {
      std::string unrolled;
      // A real layout names each of at most a few thousand layers once.
      const std::string count = m[2].str();
      const size_t n = count.size() > 6 ? kMaxLayoutChars : std::stoul(count);
      if (n * m[1].length() + s.size() > kMaxLayoutChars)
        fail(fmt::format("{}*{} unrolls to over {} stage letters", m[1].str(), count,
                         kMaxLayoutChars));
      for (size_t i = 0; i < n; ++i) unrolled += m[1].str();
      s = m.prefix().str() + unrolled + m.suffix().str();
    }
  }
  std::vector<StageBlocks> out(1);
  int64_t block = 0;
  bool seen_embedding = false, seen_head = false;
  for (char c : s) {
    StageBlocks& cur = out.back();
    switch (c) {
      case '|':
        if (!cur.embedding && !cur.head && cur.blocks == 0)
          fail(fmt::format("segment {} of \"{}\" is empty: hetplan stages hold at least one layer",
                           out.size() - 1, layout));
        out.push_back({false, block, 0, false});
        break;
      case 'E':
        if (seen_embedding || block > 0)
          fail(fmt::format("\"{}\": E must come first, once", layout));
        seen_embedding = cur.embedding = true;
        break;
      case 't':
        if (seen_head) fail(fmt::format("\"{}\": t after L", layout));
        if (cur.blocks == 0) cur.first_block = block;
        ++cur.blocks;
        ++block;
        break;
      case 'L':
        if (seen_head) fail(fmt::format("\"{}\": L must come last, once", layout));
        seen_head = cur.head = true;
        break;
      default:
        fail(
            fmt::format("\"{}\": unknown layer character '{}' (hetplan reads E, t and L; MTP "
                        "layers are not modelled)",
                        layout, c));
    }
  }
  const StageBlocks& last = out.back();
  if (!last.embedding && !last.head && last.blocks == 0)
    fail(fmt::format("the last segment of \"{}\" is empty", layout));
  if (!seen_embedding || !seen_head)
    fail(fmt::format("\"{}\": expected one E (embedding) and one L (loss)", layout));
  if (static_cast<int64_t>(out.size()) % pp != 0)
    fail(fmt::format("\"{}\" has {} segments, not a multiple of pipeline size {}", layout,
                     out.size(), pp));
  return out;
}

std::string format_megatron_layout(const std::vector<StageBlocks>& segments) {
  std::string out;
  for (size_t i = 0; i < segments.size(); ++i) {
    const StageBlocks& b = segments[i];
    if (i > 0) out += '|';
    if (b.embedding) out += 'E';
    if (b.blocks > 3)
      out += fmt::format("t*{}", b.blocks);
    else
      out += std::string(b.blocks, 't');
    if (b.head) out += 'L';
  }
  return out;
}

std::optional<std::pair<int64_t, int64_t>> megatron_first_last(
    const std::vector<StageBlocks>& stages) {
  const size_t p = stages.size();
  if (p < 2) return std::nullopt;
  for (size_t i = 0; i < p; ++i)
    if (stages[i].embedding != (i == 0) || stages[i].head != (i + 1 == p)) return std::nullopt;
  const int64_t first = stages.front().blocks, last = stages.back().blocks;
  if (first == 0 || last == 0) return std::nullopt;  // an embedding- or head-only stage
  if (p == 2) return first == last ? std::make_pair(-1L, -1L) : std::make_pair(first, last);
  const int64_t middle = stages[1].blocks;
  for (size_t i = 1; i + 1 < p; ++i)
    if (stages[i].blocks != middle) return std::nullopt;
  if (middle == 0) return std::nullopt;
  return std::make_pair(first == middle ? -1L : first, last == middle ? -1L : last);
}

}  // namespace hetplan
