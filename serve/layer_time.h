// Time to run one transformer layer of the served model on one machine type: a prompt (prefill)
// pass over a batch of tokens, and one decode step for a batch of requests. Two sources: Helix's
// measured bs2time tables (here), and times derived from hetplan's calibrated op costs
// (CostModelLayerTimes, serve/cost_layer_time.h); the planner only sees the interfaces
// below.
#pragma once

#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace hetplan::serve {

// Per-layer times of one machine type.
class LayerTimeModel {
 public:
  virtual ~LayerTimeModel() = default;
  // Seconds for one layer to process a prompt batch of `tokens` tokens (all requests together).
  virtual double prompt_s(double tokens) const = 0;
  // Seconds for one layer to run one decode step of `batch` requests (one token each).
  virtual double decode_s(double batch) const = 0;
  // The same as Helix's model reads a measured table: linear between its rows, the "0,0" row
  // included (decode_s holds a small batch at the smallest measured batch's time instead).
  virtual double decode_table_s(double batch) const { return decode_s(batch); }
  // Largest decode batch the times are known for.
  virtual double max_decode_batch() const = 0;
  // Longest prompt batch that was measured (tokens); beyond it times are extrapolated. Infinite
  // for times that are derived, not measured.
  virtual double max_measured_prompt_tokens() const {
    return std::numeric_limits<double>::infinity();
  }
  // Where the times come from, for messages ("profiles/llama2_70b/t4").
  virtual std::string origin() const { return ""; }
};

// Where per-layer times come from: one LayerTimeModel per machine type.
class LayerTimeSource {
 public:
  virtual ~LayerTimeSource() = default;
  // Throws InputError when the machine type is unknown to this source.
  virtual std::shared_ptr<const LayerTimeModel> for_machine_type(
      const std::string& machine_type) const = 0;
};

// A measured table: batch size (tokens or requests) -> milliseconds for one layer, read from a
// Helix bs2time CSV (serve/helix_profiles.h). Interpolated linearly between points;
// beyond the last point extended along the last segment; a decode batch smaller than the smallest
// measured positive batch takes that batch's time (decode there is bound by reading the weights).
class Bs2TimeTable {
 public:
  static Bs2TimeTable load(const std::filesystem::path& path);
  Bs2TimeTable(std::vector<std::pair<double, double>> points_ms, std::string origin);

  double seconds(double x) const;
  double smallest_positive() const;
  double largest() const { return points_.back().first; }
  const std::string& origin() const { return origin_; }

 private:
  std::vector<std::pair<double, double>> points_;  // (batch, ms), sorted, batch unique
  std::string origin_;
};

// Helix's measured per-layer times of one machine type.
class Bs2TimeProfile : public LayerTimeModel {
 public:
  Bs2TimeProfile(Bs2TimeTable prompt, Bs2TimeTable decode);
  double prompt_s(double tokens) const override;
  double decode_s(double batch) const override;
  double decode_table_s(double batch) const override { return decode_.seconds(batch); }
  double max_decode_batch() const override { return decode_.largest(); }
  double max_measured_prompt_tokens() const override { return prompt_.largest(); }
  std::string origin() const override { return prompt_.origin(); }

 private:
  Bs2TimeTable prompt_;
  Bs2TimeTable decode_;
};

// A directory of profiles laid out as <dir>/<machine type>/{prompt,decode}_bs2time.csv; the
// machine type's folder is matched without regard to case ("T4x2" -> t4x2/). Not thread-safe:
// tables are loaded on first use (make_problem() loads them all before any search starts).
class ProfileDirectory : public LayerTimeSource {
 public:
  explicit ProfileDirectory(std::filesystem::path dir);
  std::shared_ptr<const LayerTimeModel> for_machine_type(
      const std::string& machine_type) const override;

 private:
  std::filesystem::path dir_;
  mutable std::map<std::string, std::shared_ptr<const LayerTimeModel>> cache_;
};

}  // namespace hetplan::serve
