// A synthetic "measured" GEMM table with a known ground truth, to develop and test the GEMM fit
// without a GPU. The ground truth is deliberately more detailed than hetplan's fitted model (and
// different from it): a catalogue of kernels with their own efficiencies, K rounded to the kernel's
// K tile, pipeline fill and epilogue costs per tile, stream-K kernels without wave quantisation for
// large problems, split-K with a separate reduction kernel, L2 re-reads of large operands,
// imperfect overlap of compute and memory, a heuristic that sometimes picks a slower kernel, layout
// factors, rare irregular slow shapes, and per-shape measurement noise. Everything is deterministic
// (hashes of the shape), so tests reproduce exactly. The figures are modelled on an H100 SXM (132
// SMs, 989 TFLOP/s bf16, 3.35 TB/s, 50 MB L2) and on what cuBLAS is known to do; they are not
// measured.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "costmodel/calibration.h"
#include "costmodel/gemm_model.h"
#include "costmodel/layer_ops.h"
#include "costmodel/model.h"

namespace hetplan::testing {

struct SyntheticGpu {
  double peak_flops = 989.4e12;
  double memory_Bps = 3.35e12;
  int64_t sms = 132;
  double l2_bytes = 50e6;
  double launch_s = 4.0e-6;
  int bytes = 2;
  // Difficulty: measurement noise (log-normal sigma) and the share and size of irregular shapes.
  double noise_sigma = 0.015;
  double irregular_share = 0.05;
  double irregular_max = 0.12;    // slowdown of an irregular shape: 1.03 .. 1 + this
  double heuristic_sigma = 0.04;  // how far the kernel heuristic misjudges a candidate's time
  uint64_t seed = 1;
};

namespace synthetic {

inline uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// Uniform in [0, 1) from a shape and a stream number.
inline double uniform(const GemmShape& s, uint64_t seed, uint64_t stream) {
  return double(splitmix(gemm_shape_hash(s) ^ splitmix(seed * 1000 + stream)) >> 11) * 0x1.0p-53;
}
inline double normal(const GemmShape& s, uint64_t seed, uint64_t stream) {
  const double u1 = std::max(1e-12, uniform(s, seed, stream));
  const double u2 = uniform(s, seed, stream + 1);
  return std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

struct Kernel {
  int64_t tm, tn, tk;  // tile; K is processed in steps of tk
  double efficiency;   // main-loop fraction of the SM's peak
  double fill_steps;   // pipeline fill, in K steps
  double epilogue_s;   // per tile
  bool stream_k;       // work divided evenly over the SMs for large problems
};

inline const std::vector<Kernel>& kernels() {
  static const std::vector<Kernel> k = {
      {256, 128, 64, 0.86, 3, 1.0e-6, true},  {128, 256, 64, 0.85, 3, 1.0e-6, true},
      {128, 128, 64, 0.80, 3, 0.6e-6, false}, {128, 64, 64, 0.70, 2, 0.4e-6, false},
      {64, 128, 64, 0.69, 2, 0.4e-6, false},  {64, 64, 64, 0.55, 2, 0.3e-6, false},
      {64, 256, 32, 0.66, 4, 0.5e-6, false},
  };
  return k;
}

}  // namespace synthetic

// The time of one GEMM under the ground truth, noise included.
inline double synthetic_gemm_s(const SyntheticGpu& g, const GemmShape& s) {
  using namespace synthetic;
  const double layout_eff =
      s.trans_a && !s.trans_b ? 1.0 : (!s.trans_a && !s.trans_b ? 0.97 : 0.95);
  const double io =
      double(g.bytes) * s.batch * (double(s.m) * s.k + double(s.k) * s.n + double(s.m) * s.n);
  const double operands = double(g.bytes) * (double(s.m) * s.k + double(s.k) * s.n);
  // Operands larger than the L2 are partly read again by later tiles.
  const double reread = operands > g.l2_bytes ? 0.12 * std::log2(operands / g.l2_bytes) : 0;
  const double dram = io * (1 + reread);
  double best_true = std::numeric_limits<double>::infinity(), chosen_true = best_true;
  double best_heuristic = best_true;
  for (const Kernel& k : kernels()) {
    const int64_t tiles = (s.m + k.tm - 1) / k.tm * ((s.n + k.tn - 1) / k.tn) * s.batch;
    for (int64_t splits : {1, 2, 3, 4, 6, 8, 12, 16}) {
      if (splits > 1 && (tiles * splits > 2 * g.sms || s.k / splits < 128)) continue;
      const int64_t k_split = (s.k + splits - 1) / splits;
      const int64_t k_steps = (k_split + k.tk - 1) / k.tk;
      const double units = double(tiles * splits);
      const double waves =
          k.stream_k && units > 2 * g.sms ? units / g.sms + 0.08 : std::ceil(units / g.sms);
      const double step_s =
          2.0 * k.tm * k.tn * k.tk / (g.peak_flops / g.sms * k.efficiency * layout_eff);
      const double tile_s = (k_steps + k.fill_steps) * step_s + k.epilogue_s;
      const double compute = waves * tile_s;
      double mem = dram / (g.memory_Bps * 0.92);
      double reduce = 0;
      if (splits > 1) reduce = 2.5e-6 + 8.0 * s.m * s.n * s.batch * splits / (g.memory_Bps * 0.9);
      // Compute and memory overlap imperfectly.
      const double t = std::max(compute, mem) + 0.15 * std::min(compute, mem) + reduce;
      // cuBLAS-like heuristic: the true time misjudged by a few percent per shape and kernel, so
      // that it sometimes picks a slower one of two close candidates.
      const uint64_t stream =
          100 + 16 * static_cast<uint64_t>(&k - kernels().data()) + static_cast<uint64_t>(splits);
      const double h = t * std::exp(g.heuristic_sigma * normal(s, g.seed, stream));
      best_true = std::min(best_true, t);
      if (h < best_heuristic) {
        best_heuristic = h;
        chosen_true = t;
      }
    }
  }
  double t = g.launch_s + chosen_true;
  if (uniform(s, g.seed, 7) < g.irregular_share)
    t *= 1.03 + (g.irregular_max - 0.03) * uniform(s, g.seed, 8);
  return t * std::exp(g.noise_sigma * normal(s, g.seed, 11));
}

// The shapes the profiler measured on the H100 in the calibration of 2026-11-23 (the synthetic
// scores in docs/benchmarks.md are on these): for bf16 the TN grid (M in 16..16384 in 1.5x steps,
// N and K powers of two), NN and NT power-of-four cubes 256..16384, and the layer GEMMs of
// gpt2-medium and llama2-7b at micro-batches 1, 2, 4, 8 and tensor widths 1, 2, 4, 8; for other
// dtypes M powers of two and N, K powers of four. The profiler's grid has since grown denser
// (profiler/common/gemm_plan.cpp: N in doubling steps for the other dtypes, NN and NT cubes in
// doubling steps), so these are the sparser case.
inline std::vector<GemmShape> profiler_like_shapes(bool bf16_grid, bool layers) {
  std::vector<GemmShape> out;
  std::set<uint64_t> seen;
  auto add = [&](GemmShape s) {
    if (seen.insert(gemm_shape_hash(s)).second) out.push_back(s);
  };
  std::vector<int64_t> p2, p4, half;
  for (int64_t v = 16; v <= 16384; v *= 2) {
    p2.push_back(v);
    half.push_back(v);
    if (v * 2 <= 16384) half.push_back(v + v / 2);
  }
  for (int64_t v = 16; v <= 16384; v *= 4) p4.push_back(v);
  if (bf16_grid) {
    for (int64_t m : half)
      for (int64_t n : p2)
        for (int64_t k : p2) add({m, n, k, 1, true, false});
    for (bool tb : {false, true})
      for (int64_t m = 256; m <= 16384; m *= 4)
        for (int64_t n = 256; n <= 16384; n *= 4)
          for (int64_t k = 256; k <= 16384; k *= 4) add({m, n, k, 1, false, tb});
  } else {
    for (int64_t m : p2)
      for (int64_t n : p4)
        for (int64_t k : p4) add({m, n, k, 1, true, false});
  }
  if (layers) {
    for (const char* name : {"gpt2-medium", "llama2-7b"}) {
      const ModelSpec model = load_model(name);
      for (int64_t tp : {1, 2, 4, 8})
        for (int64_t mb : {1, 2, 4, 8}) {
          LayerShape shape;
          shape.micro_batch = mb;
          shape.tp = tp;
          for (const auto& layer : model.layers)
            for (const auto& g : layer_work(layer, shape).gemms) add(g.shape);
        }
    }
  }
  return out;
}

// A synthetic table: every shape timed by the ground truth.
inline std::vector<GemmPoint> synthetic_table(const SyntheticGpu& g,
                                              const std::vector<GemmShape>& shapes) {
  std::vector<GemmPoint> out;
  for (const auto& s : shapes) out.push_back({s, synthetic_gemm_s(g, s)});
  return out;
}

}  // namespace hetplan::testing
