// Whole-layer timings correct the cost model's layer times. A layer's time is predicted from its
// ops (GEMMs, memory-bound kernels, attention); where a calibration measured the whole layer on a
// GPU, measured / predicted per pass is a ratio that scales the ops of every layer of the same
// shape on that GPU (costmodel/cost_model.h applies it; docs/fit.md explains the rules).
//
// Two kinds of timings feed it:
// - hetplan's profiler: forward, input-gradient and weight-gradient times of one rank's shard of
//   a transformer block (no tensor-parallel communication), several micro-batches;
// - imported forward times (AMP's known-cost arrays): one micro-batch, measured inside a framework
//   with the tensor-parallel all-reduces included. The predicted communication on the node it was
//   measured on is taken off before the ratio is formed, and B and W take the forward's ratio
//   (AMP's own assumption: a layer's training step costs three times its forward).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "costmodel/calibration.h"
#include "costmodel/layer_ops.h"
#include "costmodel/model.h"

namespace hetplan {

class CostModel;
struct GpuFit;
struct GpuSpec;
struct Profile;

// The transformer block hetplan's profiler timed (profiler/common/layer_plan.h: gpt = LayerNorm,
// GeLU, biases; llama = RMSNorm, SwiGLU, rotary, no biases; causal, no dropout, fused attention).
LayerSpec measured_block(const LayerMeasurement& m);
// Its work as the profiler runs it on one rank (tp = m.tp, no communication), computed in
// `dtype`: the block's ops plus the copies the profiler makes where frameworks pass views. Its
// attention kernel takes contiguous Q, K and V, so the forward copies them out of the QKV
// projection's output (three strided copies), and the backward joins their gradients with three
// copies where the cost model counts one concatenation. A timing is compared with this, so that
// its ratio carries the error of the layer's own ops only.
LayerWork measured_block_work(const LayerMeasurement& m, Dtype dtype);

// One whole-layer timing against the cost model's prediction of the same layer from its ops.
struct LayerTiming {
  std::string source;  // "measured" (hetplan's profiler) or "imported" (forward times of a tool)
  // e.g. "gpt block, micro-batch 2" or "gpt2 layer 3 (transformer; entries 4), tp 1"
  std::string what;
  LayerKey key;
  Dtype dtype = Dtype::kBf16;  // the dtype the GPU computes in
  int64_t micro_batch = 1;
  bool forward_only = false;  // one timing stands for every pass (imported)
  // Forward and backward timed together (Sailor's Metis-format profiles): measured_s[0],
  // predicted_s[0] and comm_s[0] are the sums over the passes.
  bool whole_step = false;
  double measured_s[kNumPasses] = {0, 0, 0};   // 0: not measured
  double predicted_s[kNumPasses] = {0, 0, 0};  // from ops, communication included
  double comm_s[kNumPasses] = {0, 0, 0};       // of which predicted tensor-parallel communication
  std::string unused;                          // why it corrects nothing; "" when it does

  // predicted / measured - 1 (signed); 0 where the pass was not measured.
  double rel_error(int pass) const;
  // measured / predicted of the ops, the communication left out of both.
  double ratio(int pass) const;
};

// Every whole-layer timing of `fit` (one GPU type, `gpu` its spec) against `cost`'s prediction
// from ops (CostModel::layer_times_from_ops). Imported records that belong to one hetplan layer
// are summed into one timing.
std::vector<LayerTiming> compare_layer_timings(const CostModel& cost, const GpuSpec& gpu,
                                               const GpuFit& fit);

// The same for GPU `gpu` (its datasheet: a preset's or a cluster file's) of `profile`, on a
// cluster of one such GPU.
std::vector<LayerTiming> compare_layer_timings(const Profile& profile, const GpuSpec& gpu);

// What a correction does to pass p of a layer: its ops take rate[p] times their predicted time,
// and the pass takes fixed_s[p] more (communication is neither scaled nor added to).
struct PassScale {
  std::array<double, kNumPasses> rate{1, 1, 1};
  std::array<double, kNumPasses> fixed_s{0, 0, 0};
};

// The correction of one layer shape on one GPU type. Two models:
// - ratio: measured / predicted of the ops per pass, by micro-batch;
// - fixed + rate: measured ops time = fixed_s + rate x predicted ops time, per pass, at every
//   micro-batch. Fitted where the shape's timings lie at op times far enough apart to tell a
//   fixed cost from a rate (several micro-batches, or several tensor widths of the same layer:
//   the fixed part is taken per rank, the rate on the rank's shard), with rate > 0 and
//   fixed >= 0; otherwise the ratio model, and `why_ratio` says why.
// The choice is made per pass: a pass whose fit fails its guards keeps its ratios while the
// others keep their fixed + rate (`model` kMixed).
struct LayerCorrection {
  enum class Model { kRatio, kFixedRate, kMixed };

  LayerKey key;
  Dtype dtype = Dtype::kBf16;
  std::string source;  // "measured", or "imported (forward; B and W take its correction)"
  struct Point {
    int64_t micro_batch = 1;
    std::array<double, kNumPasses> ratio{1, 1, 1};
    int64_t timings = 0;  // how many timings were combined (their median)
  };
  std::vector<Point> points;  // ascending micro-batch; this shape's own ratios (either model)

  Model model = Model::kRatio;  // kFixedRate: every pass fixed + rate; kMixed: some
  std::array<bool, kNumPasses> fixed_rate_pass{false, false, false};  // which passes
  std::array<double, kNumPasses> fixed_s{0, 0, 0};                    // of the fixed + rate passes
  std::array<double, kNumPasses> rate{1, 1, 1};                       // of the fixed + rate passes
  std::vector<int64_t> fit_tp;  // kFixedRate, kMixed: the tensor widths whose timings were pooled
  int64_t fit_points = 0;       // kFixedRate, kMixed: distinct (tensor width, micro-batch) fitted
  std::string why_ratio;        // kRatio, kMixed: why the ratio passes have no fixed term
  // key.tp was not timed: the fixed + rate passes are the line pooled over fit_tp, carried over
  // (untimed_width_corrections); the other passes and `points` are empty, so they stay as
  // predicted.
  bool untimed_width = false;

  // Whether its fixed + rate passes may be carried to untimed tensor widths: they were pooled over
  // at least two widths (one width cannot tell how the layer's time follows its shard).
  bool carries_over_widths() const { return model != Model::kRatio && fit_tp.size() >= 2; }
  // The tensor widths it applies at, lowest and highest: from the narrowest pooled width /
  // kUntimedWidthReach to the widest x kUntimedWidthReach where it carries over, else its own.
  std::pair<int64_t, int64_t> covered_tp() const;

  // The ratios at `micro_batch`: linear in log2(micro-batch) between measured micro-batches, the
  // nearest measured one outside them.
  std::array<double, kNumPasses> at(int64_t micro_batch) const;
  // What the correction does at `micro_batch`, whichever its model.
  PassScale scale(int64_t micro_batch) const;
  // "fixed + rate (...): F 3.646 ms + 0.946 x ops, ...", "ratio (...)" or both, per pass, for
  // notes and reports.
  std::string model_summary() const;
};

// How far a pooled fixed + rate line is carried beyond the tensor widths it was fitted at: down to
// half the narrowest, up to twice the widest (between them, always). AMP's T4 block, each of its
// three widths held out and predicted from the other two, is missed by +16.6% (tp 1, half the
// narrowest), -5.6% (tp 2, between) and +9.1% (tp 4, twice the widest), against about -60%
// uncorrected (docs/benchmarks.md); its three widths test the line no further out, where the
// shard's ops shrink until the fixed term alone is left and a per-rank cost that grows with the
// group would go unseen.
inline constexpr int64_t kUntimedWidthReach = 2;

// The corrections of the tensor widths that were not timed, from `timed` (layer_corrections):
// each pass of a layer fitted as fixed + rate over at least two widths (one source, the shape
// apart from its width) gives its line to every width it covers (covered_tp) that has no
// correction of its own. Their ratio passes stay uncorrected: a ratio pooled over widths carries
// over badly (AMP's T4 block held out: +89.3% at tp 1, -32.1% at tp 4). Where the lines of both
// sources cover a width, the profiler's is taken, as its timings replace imported ones.
std::vector<LayerCorrection> untimed_width_corrections(const std::vector<LayerCorrection>& timed);

// Fits `measured = fixed + rate x predicted` to points (predicted, measured) by the one fixed +
// slope fit (costmodel/linear_fit.h: relative residuals). nullopt, with the reason, where the
// points span less than its kFixedTermMinSpread in predicted time (a fixed cost cannot be told
// from a rate), or the free line gives rate <= 0 or fixed < 0 (the ratios serve better there).
struct FixedRate {
  double fixed_s = 0;
  double rate = 1;
};
std::optional<FixedRate> fit_fixed_rate(const std::vector<std::pair<double, double>>& points,
                                        std::string& why);

// How well corrections carry over micro-batches: each usable timing predicted with the correction
// its shape gets from the timings of its other micro-batches (refitted without the timings of its
// shape at its micro-batch; signed predicted / measured - 1, per pass measured). Shapes timed at
// one micro-batch only give none.
std::array<std::vector<double>, kNumPasses> held_out_micro_batch_errors(
    const std::vector<LayerTiming>& timings, bool fixed_rate = true);

// Groups usable timings by layer shape and dtype (the median of each micro-batch's ratios).
// Timings of hetplan's own profiler replace imported ones of the same shape. Where the shape's
// timings, pooled with those of the same source over the layer's other tensor widths, lie at
// distinct op times, a fixed + rate model is fitted to the medians of each (tensor width,
// micro-batch) and used in place of the ratios (`fixed_rate` false: ratios only).
std::vector<LayerCorrection> layer_corrections(const std::vector<LayerTiming>& timings,
                                               bool fixed_rate = true);

}  // namespace hetplan
