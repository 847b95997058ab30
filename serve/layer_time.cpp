#include "serve/layer_time.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>

#include <fmt/format.h>

#include "costmodel/errors.h"

namespace hetplan::serve {
namespace {

namespace fs = std::filesystem;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool parse_number(std::string_view s, double& out) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && std::isfinite(out);
}

}  // namespace

Bs2TimeTable Bs2TimeTable::load(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path.string(), "", "cannot open the file (does it exist?)");
  std::vector<std::pair<double, double>> points;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    // A UTF-8 byte-order mark (spreadsheets write one) is not part of the first row.
    if (line_no == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const size_t comma = line.find(',');
    double batch = 0, ms = 0;
    if (comma == std::string::npos ||
        !parse_number(std::string_view(line).substr(0, comma), batch) ||
        !parse_number(std::string_view(line).substr(comma + 1), ms))
      throw InputError(path.string(), fmt::format("line {}", line_no),
                       fmt::format("expected 'batch,milliseconds', found '{}'", line));
    if (batch < 0 || ms < 0)
      throw InputError(path.string(), fmt::format("line {}", line_no),
                       "expected a batch >= 0 and a time >= 0");
    // Only Helix's "0,0" anchor row may take no time: a batch measured at 0 ms would make the
    // machine's capacity unlimited (as `hetplan import --format helix` rejects it too).
    if (batch > 0 && ms == 0)
      throw InputError(path.string(), fmt::format("line {}", line_no),
                       fmt::format("batch {:g} in 0 ms: expected a measured time > 0", batch));
    points.emplace_back(batch, ms);
  }
  return Bs2TimeTable(std::move(points), path.string());
}

Bs2TimeTable::Bs2TimeTable(std::vector<std::pair<double, double>> points_ms, std::string origin)
    : points_(std::move(points_ms)), origin_(std::move(origin)) {
  std::sort(points_.begin(), points_.end());
  for (size_t i = 1; i < points_.size(); ++i)
    if (points_[i].first == points_[i - 1].first)
      throw InputError(origin_, "", fmt::format("batch {} appears twice", points_[i].first));
  if (points_.size() < 2 || points_.back().first <= 0)
    throw InputError(origin_, "", "expected at least two points, one with a batch > 0");
}

double Bs2TimeTable::smallest_positive() const {
  for (const auto& [x, y] : points_)
    if (x > 0) return x;
  return points_.back().first;
}

double Bs2TimeTable::seconds(double x) const {
  auto hi = std::lower_bound(points_.begin(), points_.end(), std::make_pair(x, -1.0));
  if (hi == points_.begin()) return points_.front().second * 1e-3;
  if (hi == points_.end()) hi = points_.end() - 1;  // extend the last segment
  const auto lo = hi - 1;
  const double t = (x - lo->first) / (hi->first - lo->first);
  return std::max(0.0, lo->second + t * (hi->second - lo->second)) * 1e-3;
}

Bs2TimeProfile::Bs2TimeProfile(Bs2TimeTable prompt, Bs2TimeTable decode)
    : prompt_(std::move(prompt)), decode_(std::move(decode)) {}

double Bs2TimeProfile::prompt_s(double tokens) const { return prompt_.seconds(tokens); }

double Bs2TimeProfile::decode_s(double batch) const {
  return decode_.seconds(std::max(batch, decode_.smallest_positive()));
}

ProfileDirectory::ProfileDirectory(fs::path dir) : dir_(std::move(dir)) {
  if (!fs::is_directory(dir_))
    throw InputError(dir_.string(), "",
                     "expected a directory of per-layer profiles "
                     "<dir>/<machine type>/{prompt,decode}_bs2time.csv");
}

std::shared_ptr<const LayerTimeModel> ProfileDirectory::for_machine_type(
    const std::string& machine_type) const {
  if (auto it = cache_.find(machine_type); it != cache_.end()) return it->second;
  fs::path found;
  std::string available;
  std::vector<fs::path> entries;
  for (const auto& entry : fs::directory_iterator(dir_))
    if (entry.is_directory()) entries.push_back(entry.path());
  std::sort(entries.begin(), entries.end());
  for (const auto& p : entries) {
    available += (available.empty() ? "" : ", ") + p.filename().string();
    if (lower(p.filename().string()) == lower(machine_type)) found = p;
  }
  if (found.empty())
    throw InputError(
        dir_.string(), "",
        fmt::format("no per-layer profile for machine type '{}' (expected a folder "
                    "{}/ with prompt_bs2time.csv and decode_bs2time.csv; found: {})",
                    machine_type, lower(machine_type), available.empty() ? "none" : available));
  Bs2TimeTable prompt = Bs2TimeTable::load(found / "prompt_bs2time.csv");  // errors in this order
  auto model = std::make_shared<Bs2TimeProfile>(std::move(prompt),
                                                Bs2TimeTable::load(found / "decode_bs2time.csv"));
  cache_[machine_type] = model;
  return model;
}

std::string helix_profile_model(const fs::path& dir) {
  // Helix's profile folders (examples/external/helix/profiles), as `hetplan import` reads them.
  static const std::map<std::string, std::string> kFolders = {{"llama2_70b", "llama2-70b"},
                                                              {"llama1_30b", "llama1-30b"}};
  const fs::path name = dir.filename().empty() ? dir.parent_path().filename() : dir.filename();
  const auto it = kFolders.find(lower(name.string()));
  return it == kFolders.end() ? "" : it->second;
}

}  // namespace hetplan::serve
