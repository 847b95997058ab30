// The records of a calibration file (GEMM, kernel, layer, collective, p2p, host-device, imported
// layer and serving timings, host cost) and their JSON, one pair of functions each. The file that
// holds them is costmodel/calibration.h; docs/formats.md has the keys.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "costmodel/collective_kind.h"
#include "costmodel/document.h"
#include "costmodel/dtype.h"
#include "costmodel/stats.h"

namespace hetplan {

// One GEMM shape: C[m x n] = op(A)[m x k] * op(B)[k x n], `batch` independent products.
// Column-major as cuBLAS sees it; trans_a/trans_b as in cublasLtMatmul.
struct GemmShape {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  bool trans_a = false, trans_b = false;

  double flops() const { return 2.0 * static_cast<double>(m) * n * k * batch; }
  bool operator<(const GemmShape& o) const;
  bool operator==(const GemmShape& o) const = default;
};

struct GemmMeasurement {
  Dtype dtype = Dtype::kBf16;
  GemmShape shape;
  std::string origin;  // "grid", or "<model>/<layer>/<gemm>/<pass>" for --layers sweeps
  Distribution time_s;
  std::vector<std::string> kernels;  // kernel names seen by CUPTI
  bool tensor_cores = false;         // whether those kernels use tensor cores
  Json algo;                         // cuBLASLt algorithm description, free form
  Json method;  // optional: how it was measured (samples, launches, rotation, reference check)
  Json trace;   // optional: CUPTI trace (kernel time, launch gap, event cross-check)
};

// One of our own kernels (kernels/) at one size.
struct KernelMeasurement {
  std::string kernel;  // registry name, e.g. "layernorm_fwd"
  Dtype dtype = Dtype::kBf16;
  Json params;       // sizes: {"rows": .., "cols": ..} or attention shape
  double bytes = 0;  // minimum bytes moved (each input read once, each output written once)
  double flops = 0;
  Distribution time_s;
  Json method;  // optional: how it was measured
  Json trace;   // optional: CUPTI trace
};

// A whole transformer layer's passes, timed on the GPU.
struct LayerMeasurement {
  std::string style;  // "gpt" (LayerNorm, biases, GeLU) or "llama" (RMSNorm, SwiGLU, rotary)
  Dtype dtype = Dtype::kBf16;
  int64_t micro_batch = 0, seq_len = 0, hidden = 0, heads = 0, kv_heads = 0, ffn_hidden = 0;
  int64_t tp = 1;
  Distribution forward_s, backward_input_s, backward_weight_s;
  int64_t activation_bytes = 0;  // kept for backward, measured
  Json method;                   // optional: how it was measured (samples, activation cross-checks)
  Json trace;                    // optional: CUPTI trace per pass
};

struct CollectiveMeasurement {
  CollectiveKind op = CollectiveKind::kAllReduce;
  Dtype dtype = Dtype::kBf16;
  double bytes = 0;  // nccl-tests convention: the whole array
  int64_t group_size = 0;
  int64_t nodes = 1;
  int64_t gpus_per_node = 0;
  std::string link;  // "nvswitch", "nvlink", "pcie", "net", "mixed", "self"
  Distribution time_s;
  double algbw_GBps = 0, busbw_GBps = 0;
  bool ok = true;
  std::string error;
  // GPU kinds in the group, sorted and unique (driver names or hetplan GPU types); keeps the
  // measurements of different node kinds apart once files are merged. Empty in older files.
  std::vector<std::string> gpus;
};

struct P2pMeasurement {
  int64_t src = 0, dst = 0;  // global ranks
  double bytes = 0;
  Distribution time_s;
  double GBps = 0;
  std::string link;
  std::vector<std::string> gpus;  // kinds of src and dst, sorted and unique; may be empty
};

struct HostDeviceMeasurement {
  std::string direction;  // "h2d" or "d2h"
  bool pinned = true;
  double bytes = 0;
  Distribution time_s;
  double GBps = 0;
  std::vector<std::string> gpus;  // the GPU's kind; may be empty
};

// One layer's forward time imported from another tool's per-layer profile (AMP's known-cost
// arrays): one record per entry of the tool's layer list, with the hetplan layer it maps to.
struct LayerForwardMeasurement {
  std::string model;   // the tool's model name, e.g. "gpt2"
  int64_t entry = 0;   // index in the tool's layer list
  int64_t layer = -1;  // hetplan layer index it belongs to; -1 when it maps to none
  std::string kind;    // "embedding", "transformer", "lm_head" or "other"
  int64_t hidden = 0, heads = 0, seq_len = 0, vocab = 0;  // 0 where not applicable or unknown
  // A transformer entry's MLP: its width (0: 4 x hidden, GPT-2's) and activation ("gelu" or
  // "relu"; "": gelu).
  int64_t ffn_hidden = 0;
  std::string activation;
  // forward_s holds the forward and backward together (Sailor's Metis-format profiles): its
  // correction is one ratio of the totals for every pass.
  bool forward_backward = false;
  // The framework preset whose kernels the layer ran ("": hetplan's own fused ones): the layer
  // is rebuilt with them when it is compared with the prediction.
  std::string framework;
  int64_t micro_batch = 1, tp = 1;
  Dtype dtype = Dtype::kFp16;
  Distribution forward_s;
  // The node preset it was measured on (its tensor-parallel links); the file's context.node_type
  // when the record does not say.
  std::string node_type;
};

// One point of a serving profile (Helix's prompt/decode batch-to-time tables): the time of one
// transformer layer for a batch of `tokens` tokens on one machine of `gpus` GPUs.
struct ServingLayerMeasurement {
  std::string model;  // hetplan model preset the layer belongs to, e.g. "llama2-70b"
  std::string phase;  // "prompt" or "decode"
  int64_t tokens = 0;
  int64_t gpus = 1;
  Distribution time_s;
};

// The host's time per kernel of a framework's eager training step (item 4 of docs/benchmarks.md
// "Still to be measured"): a step of a configuration so small that the GPU finishes each kernel
// before the host has issued the next takes what the host needs to issue them, so the step time
// over the kernels hetplan counts for it (`predict --json`: kernels_per_iteration) is the host's
// cost per counted kernel. scripts/measure_host_cost.py measures it with the reference harness.
struct HostMeasurement {
  std::string framework = "pytorch-eager";  // what issued the kernels (the reference harness)
  std::string config;                       // what ran, e.g. "tiny-gpt s128 mb1 x 2"
  int64_t kernels = 0;                      // kernels of one step as hetplan counts them
  Distribution step_s;                      // the measured step
  double device_s = 0;  // hetplan's device time for the step (0 = not given): small if host-bound
  double s_per_kernel = 0;  // step median / kernels (derived when read)
};

// A measurement that failed; kept so that a report can say what is missing and why.
struct FailedMeasurement {
  std::string what;
  std::string error;
};

// m, n, k, batch, trans_a, trans_b: the keys every file with a GEMM shape uses.
Json to_json(const GemmShape& s);
GemmShape gemm_shape_from_json(ObjectReader& r);
// A p2p record's `key` ("src" or "dst"): a GPU's global rank, in [0, kMaxClusterGpus).
int64_t global_rank(ObjectReader& r, std::string_view key);
// A collective, p2p or host-device record's "bytes": the message size, a whole number > 0.
double message_bytes(ObjectReader& r);
Json to_json(const GemmMeasurement& m);
Json to_json(const KernelMeasurement& m);
Json to_json(const LayerMeasurement& m);
Json to_json(const CollectiveMeasurement& m);
Json to_json(const P2pMeasurement& m);
Json to_json(const HostDeviceMeasurement& m);
Json to_json(const LayerForwardMeasurement& m);
Json to_json(const ServingLayerMeasurement& m);
Json to_json(const HostMeasurement& m);

GemmMeasurement gemm_from_json(ObjectReader r);
KernelMeasurement kernel_from_json(ObjectReader r);
LayerMeasurement layer_from_json(ObjectReader r);
CollectiveMeasurement collective_from_json(ObjectReader r);
P2pMeasurement p2p_from_json(ObjectReader r);
HostDeviceMeasurement host_device_from_json(ObjectReader r);
LayerForwardMeasurement layer_forward_from_json(ObjectReader r);
ServingLayerMeasurement serving_layer_from_json(ObjectReader r);
HostMeasurement host_from_json(ObjectReader r);

}  // namespace hetplan
