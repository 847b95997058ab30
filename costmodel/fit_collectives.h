// Fits of measured communication times: latency + bytes / bandwidth per (collective, dtype, group
// shape, link kind), with separate small- and large-message regimes (NCCL switches protocol and
// algorithm with the message size, so one line fits neither end well). Also fits the pairwise p2p
// matrix and host-device copies, and composes hierarchical collectives (inside nodes, then across)
// from the measured parts, checked against measured whole-cluster runs. See docs/collectives.md.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/calibration.h"
#include "costmodel/document.h"

namespace hetplan {

// The bandwidth of a term whose times do not grow with the message size over its regime (one-GPU
// communicators' small messages): latency alone. Written as null in JSON.
inline constexpr double kLatencyOnly = std::numeric_limits<double>::infinity();

// One latency-bandwidth term: time = latency_s + bytes / (bandwidth_GBps * 1e9).
struct LatencyBandwidth {
  double latency_s = 0;
  double bandwidth_GBps = 0;

  double time_s(double bytes) const { return latency_s + bytes / (bandwidth_GBps * 1e9); }
  bool latency_only() const { return bandwidth_GBps == kLatencyOnly; }
};

// Two regimes split at a breakpoint: sizes <= breakpoint_bytes use `small`, larger ones `large`.
// Where the data show one regime only, `large` equals `small` and breakpoint_bytes is the largest
// size measured.
struct TwoRegimeFit {
  LatencyBandwidth small, large;
  double breakpoint_bytes = 0;
  double median_rel_error = 0;  // |predicted / measured - 1| over the fitted points
  double max_rel_error = 0;
  int64_t points = 0;

  double time_s(double bytes) const {
    return bytes <= breakpoint_bytes ? small.time_s(bytes) : large.time_s(bytes);
  }
};

// One measured point: message size (nccl-tests convention: the whole array) and median time.
struct SizeTime {
  double bytes = 0;
  double time_s = 0;
};

struct FitOptions {
  int min_points_per_regime = 3;  // fewer points than 2x this: one regime only
  int robust_iterations = 10;     // Huber reweighting rounds (robust to stray medians)
};

// Least-squares fit of latency + bytes/bandwidth minimising relative residuals, Huber-reweighted.
LatencyBandwidth fit_latency_bandwidth(const std::vector<SizeTime>& points,
                                       const FitOptions& options = {});
// Two-regime fit: searches every breakpoint between measured sizes and keeps the two-regime model
// only where it beats one line by the Bayesian information criterion. Needs >= 2 points.
TwoRegimeFit fit_two_regimes(std::vector<SizeTime> points, const FitOptions& options = {});

// A fitted collective: the key it was measured under and its two-regime curve.
struct CollectiveFit : TwoRegimeFit {
  CollectiveKind op = CollectiveKind::kAllReduce;
  Dtype dtype = Dtype::kBf16;
  int64_t group_size = 0;
  int64_t nodes = 1;
  int64_t gpus_per_node = 0;
  std::string link;               // "nvswitch", "nvlink", "pcie", "net", "self", ...
  std::vector<std::string> gpus;  // GPU kinds in the group (sorted); empty when unknown

  // Bus bandwidth (nccl-tests) of the large regime, for comparison with nccl-tests' tables.
  double large_busbw_GBps() const {
    return large.bandwidth_GBps * bus_bandwidth_factor(op, group_size);
  }
};

// A fitted pair of the p2p matrix (global ranks of the calibration run that measured it).
struct P2pFit : TwoRegimeFit {
  int64_t src = 0, dst = 0;
  std::string link;
  std::vector<std::string> gpus;
};

// A fitted host-device copy direction.
struct HostDeviceFit : TwoRegimeFit {
  std::string direction;  // "h2d" or "d2h"
  bool pinned = true;
  std::vector<std::string> gpus;
};

// How well the hierarchical composition predicts a measured whole-cluster collective.
struct HierarchyCheck {
  CollectiveKind op = CollectiveKind::kAllReduce;
  Dtype dtype = Dtype::kBf16;
  int64_t nodes = 0, gpus_per_node = 0;
  double median_rel_error = 0, max_rel_error = 0;
  int64_t points = 0;
};

// Everything fitted from the communication part of one (merged) calibration file.
struct CommunicationFit {
  std::vector<CollectiveFit> collectives;
  std::vector<P2pFit> p2p;
  std::vector<HostDeviceFit> host_device;
  std::vector<HierarchyCheck> hierarchy_checks;

  // The fit for an exact key; `gpus` empty matches any kind. nullptr when not measured.
  const CollectiveFit* find(CollectiveKind op, Dtype dtype, int64_t group_size, int64_t nodes,
                            const std::string& link = "",
                            const std::vector<std::string>& gpus = {}) const;
};

// Fits every ok measurement of `file`, grouped by key; failed measurements are skipped.
CommunicationFit fit_communication(const CalibrationFile& file, const FitOptions& options = {});

// Time of a collective over `nodes` x `gpus_per_node` GPUs composed from measured parts: intra-node
// reduce-scatter, inter-node collective over one GPU per node on 1/gpus_per_node of the data,
// intra-node all-gather (all_reduce; all_gather and reduce_scatter use the matching halves).
// With several GPU kinds in `gpus`, the slowest node's intra-node part counts. nullopt when a part
// is missing or the collective has no hierarchical form.
std::optional<double> hierarchical_time_s(const CommunicationFit& fit, CollectiveKind op,
                                          Dtype dtype, double bytes, int64_t nodes,
                                          int64_t gpus_per_node,
                                          const std::vector<std::string>& gpus = {});

Json to_json(const LatencyBandwidth& term);
Json to_json(const CollectiveFit& fit);
Json to_json(const P2pFit& fit);
Json to_json(const HostDeviceFit& fit);
Json to_json(const HierarchyCheck& check);
Json to_json(const CommunicationFit& fit);
CollectiveFit collective_fit_from_json(ObjectReader r);
P2pFit p2p_fit_from_json(ObjectReader r);
HostDeviceFit host_device_fit_from_json(ObjectReader r);
HierarchyCheck hierarchy_check_from_json(ObjectReader r);
CommunicationFit communication_fit_from_json(ObjectReader r);

}  // namespace hetplan
