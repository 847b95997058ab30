#include "serve/cost_layer_time.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "costmodel/cost_model.h"
#include "costmodel/errors.h"
#include "costmodel/layer_ops.h"

namespace hetplan::serve {
namespace {

// Node presets whose fabric a machine of that GPU uses for its tensor-parallel group.
const std::map<std::string, std::string> kNodeOfGpu = {
    {"t4", "g4dn.12xlarge"},       {"l4", "g6.12xlarge"},         {"v100", "p3.8xlarge"},
    {"a100-40gb", "p4d.24xlarge"}, {"a100-80gb", "p4d.24xlarge"}, {"h100-sxm", "p5.48xlarge"}};

// Decode batches the capacity model may ask for; beyond this the KV cache runs out first.
constexpr double kMaxDecodeBatch = 1024;

class CostLayerModel : public LayerTimeModel {
 public:
  // Each layer runs tensor-parallel over `gpus` GPUs of `node`.
  CostLayerModel(const ModelSpec& model, const Profile& profile, const NodeSpec& node, int64_t gpus,
                 double prompt_tokens, double context_tokens)
      : prompt_tokens_(std::max(1.0, prompt_tokens)), context_tokens_(context_tokens) {
    cluster_.name = fmt::format("{}x{}", node.gpu.name, gpus);
    cluster_.groups.push_back({node, 1, ""});
    cost_ = std::make_unique<CostModel>(profile, cluster_);
    std::vector<int64_t> devices;
    for (int64_t i = 0; i < gpus; ++i) devices.push_back(i);
    tp_ = make_comm_group(cluster_, cluster_devices(cluster_), devices);
    tp_size_ = gpus;
    for (const auto& l : model.layers)
      if (l.block()) {
        block_ = l;
        break;
      }
    dtype_ = model.dtype;
  }

  double prompt_s(double tokens) const override {
    if (tokens <= 0) return 0;
    // Requests of the average prompt length; the time scales with the tokens beyond that.
    const int64_t requests = std::max<int64_t>(1, std::llround(tokens / prompt_tokens_));
    LayerSpec layer = block_;
    layer.seq_len = std::max<int64_t>(1, std::llround(prompt_tokens_));
    const double t = forward_s(layer, requests, /*decode=*/false);
    return t * tokens / (static_cast<double>(requests) * static_cast<double>(layer.seq_len));
  }

  double decode_s(double batch) const override {
    if (batch <= 0) return 0;
    LayerSpec layer = block_;
    layer.seq_len = 1;
    return forward_s(layer, std::max<int64_t>(1, std::llround(batch)), /*decode=*/true);
  }

  double max_decode_batch() const override { return kMaxDecodeBatch; }

 private:
  // Forward pass of one block; a decode step reads each request's KV cache instead of running
  // self-attention over its one new token.
  double forward_s(const LayerSpec& layer, int64_t micro_batch, bool decode) const {
    LayerShape shape;
    shape.micro_batch = micro_batch;
    shape.tp = tp_size_;
    shape.dtype = dtype_;
    LayerWork w = layer_work(layer, shape);
    if (decode) {
      w.attention.clear();
      const TransformerLayer& b = *layer.block();
      const double kv = 2.0 * static_cast<double>(b.kv_heads / tp_size_) * b.head_dim *
                        dtype_bytes(dtype_) * context_tokens_ * static_cast<double>(micro_batch);
      w.memory_ops.push_back({"attention_decode", Pass::kForward, kv});
    }
    const GpuSpec& gpu = cluster_.groups.front().node.gpu;
    return cost_->layer_times(gpu, w, Recompute::kNone, tp_, dtype_).pass_s[0];
  }

  double prompt_tokens_, context_tokens_;
  ClusterSpec cluster_;
  std::unique_ptr<CostModel> cost_;
  CommGroup tp_;
  int64_t tp_size_ = 1;
  LayerSpec block_;
  Dtype dtype_ = Dtype::kBf16;
};

}  // namespace

std::pair<std::string, int64_t> gpu_of_machine_type(const std::string& machine_type) {
  std::string t = machine_type;
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  int64_t count = 1;
  if (const auto x = t.rfind('x'); x != std::string::npos && x + 1 < t.size() && x > 0) {
    int64_t n = 0;
    auto [p, ec] = std::from_chars(t.data() + x + 1, t.data() + t.size(), n);
    if (ec == std::errc() && p == t.data() + t.size() && n > 0) {
      count = n;
      t = t.substr(0, x);
    }
  }
  static const std::map<std::string, std::string> kAlias = {
      {"a100", "a100-40gb"}, {"h100", "h100-sxm"}, {"v100", "v100"}, {"t4", "t4"}, {"l4", "l4"}};
  if (auto it = kAlias.find(t); it != kAlias.end()) t = it->second;
  if (!kNodeOfGpu.count(t))
    throw InputError(
        fmt::format("machine type \"{}\": expected a GPU (A100, V100, L4, T4, H100, "
                    "or a GPU preset) with an optional xN suffix",
                    machine_type));
  return {t, count};
}

CostModelLayerTimes::CostModelLayerTimes(const ModelSpec& model, Profile profile,
                                         double prompt_tokens, double context_tokens,
                                         std::map<std::string, NodeSpec> nodes)
    : model_(model),
      profile_(std::move(profile)),
      prompt_tokens_(prompt_tokens),
      context_tokens_(context_tokens),
      nodes_(std::move(nodes)) {}

std::shared_ptr<const LayerTimeModel> CostModelLayerTimes::for_machine_type(
    const std::string& machine_type) const {
  if (auto it = cache_.find(machine_type); it != cache_.end()) return it->second;
  std::shared_ptr<const LayerTimeModel> m;
  if (auto node = nodes_.find(machine_type); node != nodes_.end()) {
    m = std::make_shared<CostLayerModel>(model_, profile_, node->second, node->second.gpus,
                                         prompt_tokens_, context_tokens_);
  } else {
    // A Helix machine type: its GPU in the node preset of that GPU (for the fabric).
    const auto [gpu, count] = gpu_of_machine_type(machine_type);
    NodeSpec node_spec = load_node(kNodeOfGpu.at(gpu));
    node_spec.gpu = load_gpu(gpu);
    node_spec.gpus = std::max(node_spec.gpus, count);
    m = std::make_shared<CostLayerModel>(model_, profile_, node_spec, count, prompt_tokens_,
                                         context_tokens_);
  }
  cache_[machine_type] = m;
  return m;
}

}  // namespace hetplan::serve
