#include "serve/layer_time.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "serve/helix_profiles.h"

namespace hetplan::serve {
namespace {

namespace fs = std::filesystem;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

Bs2TimeTable Bs2TimeTable::load(const fs::path& path) {
  std::vector<std::pair<double, double>> points;
  for (const Bs2TimeRow& row : read_bs2time_csv(path))
    points.emplace_back(static_cast<double>(row.batch), row.ms);
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

}  // namespace hetplan::serve
