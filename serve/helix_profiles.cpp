#include "serve/helix_profiles.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "costmodel/stats.h"

namespace hetplan::serve {
namespace {

namespace fs = std::filesystem;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

template <typename T>
bool parse(std::string_view s, T& out) {
  s = trim(s);
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if constexpr (std::is_floating_point_v<T>)
    if (!std::isfinite(out)) return false;
  return ec == std::errc() && p == s.data() + s.size();
}

// Helix's profile folders (examples/external/helix/profiles) and the model presets they hold.
const std::map<std::string, std::string> kModelFolders = {{"llama1_30b", "llama1-30b"},
                                                          {"llama2_70b", "llama2-70b"}};

}  // namespace

std::vector<Bs2TimeRow> read_bs2time_csv(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string(), "", "cannot open the file (does it exist?)");
  std::vector<Bs2TimeRow> rows;
  std::map<int64_t, int> line_of;  // batch -> line, for a batch given twice
  std::string text;
  int line_no = 0;
  while (std::getline(in, text)) {
    ++line_no;
    // A UTF-8 byte-order mark (spreadsheets write one) is not part of the first row.
    if (line_no == 1 && text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);
    const std::string_view row = trim(text);
    if (row.empty()) continue;
    const std::string where = fmt::format("line {}", line_no);
    const size_t comma = row.find(',');
    Bs2TimeRow r;
    r.line = line_no;
    if (comma == std::string_view::npos || !parse(row.substr(0, comma), r.batch) ||
        !parse(row.substr(comma + 1), r.ms) || r.batch < 0 || r.ms < 0)
      throw InputError(path.string(), where,
                       fmt::format("expected \"batch,milliseconds\" (a whole number and a "
                                   "number, both >= 0), found \"{}\"",
                                   row));
    // Only Helix's "0,0" anchor may take no time: a batch measured at 0 ms would make the
    // machine's capacity unlimited.
    if (r.batch > 0 && r.ms == 0)
      throw InputError(path.string(), where,
                       fmt::format("batch {} in 0 ms: expected a measured time > 0", r.batch));
    if (r.ms / 1e3 > kMaxMeasuredSeconds)
      throw InputError(path.string(), where,
                       fmt::format("{} ms for batch {}: expected at most a day", r.ms, r.batch));
    if (auto [it, fresh] = line_of.emplace(r.batch, line_no); !fresh)
      throw InputError(
          path.string(), where,
          fmt::format("batch {} again (also line {}): one row per batch", r.batch, it->second));
    rows.push_back(r);
  }
  return rows;
}

std::string helix_profile_model(const fs::path& dir) {
  const fs::path name = dir.filename().empty() ? dir.parent_path().filename() : dir.filename();
  const auto it = kModelFolders.find(lower(name.string()));
  return it == kModelFolders.end() ? "" : it->second;
}

std::string helix_profile_model_folders() {
  std::string out;
  for (auto it = kModelFolders.rbegin(); it != kModelFolders.rend(); ++it)
    out += (out.empty() ? "" : ", ") + it->first;
  return out;
}

std::optional<std::string> helix_gpu_preset(const std::string& gpu) {
  static const std::map<std::string, std::string> kGpus = {
      {"a100", "a100-40gb"}, {"v100", "v100"}, {"l4", "l4"}, {"t4", "t4"}};
  const auto it = kGpus.find(lower(gpu));
  if (it == kGpus.end()) return std::nullopt;
  return it->second;
}

}  // namespace hetplan::serve
