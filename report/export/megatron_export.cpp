// Megatron-LM command-line arguments. Flag names as in megatron/training/arguments.py.
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "report/export/exporters.h"
#include "report/megatron_layout.h"

namespace hetplan {
namespace {

struct Args {
  std::vector<std::string> lines;
  void add(const std::string& flag) { lines.push_back(flag); }
  template <typename T>
  void add(const std::string& flag, const T& value) {
    lines.push_back(fmt::format("{} {}", flag, value));
  }
};

// The blocks as Megatron-Core builds them: the decoder's (dense and MoE, --moe-layer-freq's
// pattern) and the multi-token-prediction modules after them (--mtp-num-layers), which
// --num-layers does not count.
struct MegatronBlocks {
  std::vector<const TransformerLayer*> decoder;
  int64_t mtp = 0;
  bool mtp_repeated = false;                // --mtp-use-repeated-layer
  const TransformerLayer* dense = nullptr;  // the first dense block (an MLP, no experts), if any
  const TransformerLayer* moe = nullptr;    // the first MoE block, if any
  // A hybrid model (ModelSpec::is_hybrid): its layers are --hybrid-layer-pattern's letters, and
  // Megatron-LM runs it with pretrain_hybrid.py.
  bool hybrid = false;
};

MegatronBlocks megatron_blocks(const ModelSpec& model) {
  MegatronBlocks m;
  m.hybrid = model.is_hybrid();
  for (const auto& l : model.layers)
    if (const auto* b = l.block()) {
      if (b->mtp_vocab > 0) {
        ++m.mtp;
        m.mtp_repeated = m.mtp_repeated || b->mtp_repeat;
        continue;
      }
      m.decoder.push_back(b);
      if (b->is_moe() && !m.moe) m.moe = b;
      if (!b->is_moe() && b->has_mlp() && !m.dense) m.dense = b;
    }
  return m;
}

// Megatron-Core's MoE flags: experts, router, the experts' and the shared experts' widths, the
// pattern of dense and MoE layers, the dispatcher and grouped GEMMs.
void moe_args(const MegatronBlocks& m, const Strategy& s, Args& a, ExportResult& out) {
  const TransformerLayer& e = *m.moe;
  a.add("--num-experts", e.experts);
  a.add("--moe-router-topk", e.top_k);
  a.add("--moe-ffn-hidden-size", e.ffn_hidden);
  if (e.shared_experts > 0)
    a.add("--moe-shared-expert-intermediate-size", e.shared_experts * e.shared_ffn_hidden);
  if (e.shared_expert_gate) a.add("--moe-shared-expert-gate");
  if (e.moe_latent > 0) a.add("--moe-latent-size", e.moe_latent);
  if (m.dense && !m.hybrid) {  // a hybrid model's pattern places its MoE layers
    std::vector<int> pattern;  // 1: an MoE layer, 0: dense, in decoder order
    for (const auto* b : m.decoder) pattern.push_back(b->is_moe() ? 1 : 0);
    a.add("--moe-layer-freq", fmt::format("\"[{}]\"", fmt::join(pattern, ",")));
  }
  a.add("--moe-token-dispatcher-type", to_string(s.moe_dispatcher));
  if (s.moe_dispatcher == MoeDispatcher::kFlex) {
    // hetplan's flex sends a token once per destination node and GPU, as both of Megatron-Core's
    // node-aware backends do; HybridEP is the one Megatron-Bridge's perf recipes run.
    a.add("--moe-flex-dispatcher-backend", "hybridep");
    out.approximations.push_back(
        "flex dispatcher: DeepEP or HybridEP must be installed (--moe-flex-dispatcher-backend "
        "deepep works the same way in hetplan's model)");
  }
  a.add("--moe-grouped-gemm");
  if (s.ep_comm_overlap) {
    // Megatron-Bridge's _set_moe_a2a_overlap_overrides pairs the overlap with the delayed weight
    // gradient.
    a.add("--overlap-moe-expert-parallel-comm");
    a.add("--delay-wgrad-compute");
  }
  if (s.moe_imbalance > 1)
    out.approximations.push_back(fmt::format(
        "hetplan planned for routing {:.2f}x the mean tokens onto the busiest expert; Megatron-LM "
        "routes dropless by default (--moe-expert-capacity-factor drops tokens past a capacity)",
        s.moe_imbalance));
  else
    out.approximations.push_back(
        "hetplan planned for balanced routing (every expert the mean of the tokens), as NVIDIA's "
        "published MoE benchmarks force it (--moe-router-force-load-balancing, a benchmark-only "
        "flag); real routing is less even");
}

// Megatron-Core's multi-latent attention (DeepSeek-V2/V3).
void mla_args(const TransformerLayer& b, Args& a) {
  a.add("--multi-latent-attention");
  if (b.mla.q_lora_rank > 0) a.add("--q-lora-rank", b.mla.q_lora_rank);
  a.add("--kv-lora-rank", b.mla.kv_lora_rank);
  a.add("--qk-head-dim", b.mla.qk_nope_head_dim);
  a.add("--qk-pos-emb-head-dim", b.mla.qk_rope_head_dim);
  a.add("--v-head-dim", b.mla.v_head_dim);
}

// Context parallelism, expert parallelism and the low-precision recipe of the strategy.
void parallel_and_precision_args(const ModelSpec& model, const Strategy& s, Args& a,
                                 ExportResult& out) {
  if (s.cp > 1) {
    a.add("--context-parallel-size", s.cp);
    // Megatron-LM passes --cp-comm-type to Transformer Engine, whose values these are.
    a.add("--cp-comm-type", to_string(s.cp_comm));
    if (s.cp_comm == CpComm::kA2aP2p)
      a.add("--hierarchical-context-parallel-sizes",
            fmt::format("{} {}", s.cp_a2a, s.cp / s.cp_a2a));
  }
  if (s.ep > 1) a.add("--expert-model-parallel-size", s.ep);
  if (s.expert_tp() != s.tp) a.add("--expert-tensor-parallel-size", s.expert_tp());
  switch (s.precision) {
    case Precision::kBf16:
      break;
    case Precision::kFp8Delayed:
      a.add("--fp8-format", "hybrid");
      a.add("--fp8-recipe", "delayed");
      break;
    case Precision::kFp8Current:
      a.add("--fp8-format", "hybrid");
      a.add("--fp8-recipe", "tensorwise");
      break;
    case Precision::kFp8Blockwise:
      a.add("--fp8-format", "e4m3");
      a.add("--fp8-recipe", "blockwise");
      break;
    case Precision::kMxfp8:
      a.add("--fp8-format", "e4m3");
      a.add("--fp8-recipe", "mxfp8");
      break;
    case Precision::kNvfp4:
      a.add("--fp4-format", "e2m1");
      a.add("--fp4-recipe", "nvfp4");
      break;
  }
  if (s.low_precision_params && s.precision != Precision::kBf16)
    a.add(s.precision == Precision::kNvfp4 ? "--fp4-param-gather" : "--fp8-param-gather");
  if (s.precision != Precision::kBf16 && model.dtype != Dtype::kBf16)
    out.unsupported.push_back(
        fmt::format("precision {} over {} training: Transformer Engine's "
                    "recipes run over bf16",
                    to_string(s.precision), to_string(model.dtype)));
}

// The host mode: hetplan's cuda-graphs replays the whole forward-backward, Megatron-Core's
// --cuda-graph-impl full_iteration (FullCudaGraphWrapper around forward_backward_func;
// validate_args asserts --no-check-for-nan-in-loss-and-grad with it); the optimizer step stays
// eager either way.
void host_args(const Strategy& s, Args& a, ExportResult& out) {
  if (s.host_mode == HostMode::kCudaGraphs) {
    a.add("--cuda-graph-impl", "full_iteration");
    a.add("--no-check-for-nan-in-loss-and-grad");
  } else {
    export_detail::eager_engine_notes(s, "Megatron-LM", out);  // torch.compile
  }
}

// The block Megatron-LM's flags describe: the first decoder block, when every decoder block has its
// attention and norms, every dense block its MLP, and every MoE block its experts (Megatron-Core
// builds dense and MoE layers by --moe-layer-freq); nullptr, with the reason, otherwise.
// A hybrid model's block the attention flags describe (its first attention layer), when every
// layer of each letter is alike (Megatron-Core builds one spec per letter); nullptr, with the
// reason, otherwise.
const LayerSpec* hybrid_block(const ModelSpec& model, ExportResult& out) {
  const LayerSpec* attention = nullptr;
  std::map<char, const LayerSpec*> first;
  for (const auto& l : model.layers) {
    const TransformerLayer* b = l.block();
    if (!b || b->mtp_vocab > 0) continue;  // MTP modules: their own pattern after a /
    const char c = hybrid_letter(*b);
    if (c == 0) {
      out.unsupported.push_back(fmt::format(
          "model {}: layer {} holds attention and an MLP together, which --hybrid-layer-pattern "
          "has no letter for (a hybrid model's layers hold one mixer each)",
          model.name, l.name));
      return nullptr;
    }
    const auto [it, fresh] = first.emplace(c, &l);
    if (!fresh && (*it->second->block() != *b || it->second->hidden != l.hidden ||
                   it->second->seq_len != l.seq_len)) {
      out.unsupported.push_back(fmt::format(
          "model {}: layer {} differs in shape from the other '{}' layers; Megatron-Core builds "
          "one layer spec per letter of --hybrid-layer-pattern",
          model.name, l.name, c));
      return nullptr;
    }
    if (c == '*' && !attention) attention = &l;
  }
  if (!attention)
    out.unsupported.push_back(fmt::format(
        "model {}: a hybrid model without attention layers (hetplan's export takes the attention "
        "flags from one)",
        model.name));
  return attention;
}

const LayerSpec* megatron_block(const ModelSpec& model, ExportResult& out) {
  if (const std::string problem = layer_structure_problem(model); !problem.empty()) {
    out.unsupported.push_back(problem);
    return nullptr;
  }
  if (model.is_hybrid()) return hybrid_block(model, out);
  const LayerSpec* first = nullptr;
  const TransformerLayer *dense = nullptr, *moe = nullptr;
  for (const auto& l : model.layers) {
    const TransformerLayer* b = l.block();
    if (!b) continue;
    if (!first) first = &l;
    const TransformerLayer& f = *first->block();
    const TransformerLayer*& kind = b->is_moe() ? moe : dense;
    if (!kind) kind = b;
    const bool same_attention = l.hidden == first->hidden && l.seq_len == first->seq_len &&
                                b->heads == f.heads && b->kv_heads == f.kv_heads &&
                                b->head_dim == f.head_dim && b->mla == f.mla && b->norm == f.norm &&
                                b->activation == f.activation;
    const bool same_mlp = b->ffn_hidden == kind->ffn_hidden && b->experts == kind->experts &&
                          b->top_k == kind->top_k && b->shared_experts == kind->shared_experts &&
                          b->shared_ffn_hidden == kind->shared_ffn_hidden &&
                          b->moe_latent == kind->moe_latent;
    if (!same_attention || !same_mlp) {
      out.unsupported.push_back(fmt::format(
          "model {}: layer {} differs in shape from the other {} blocks; Megatron-LM builds one "
          "attention for every layer and one MLP per kind (dense, MoE)",
          model.name, l.name, b->is_moe() ? "MoE" : "dense"));
      break;
    }
  }
  return first;
}

// A hybrid model's --hybrid-layer-pattern, its stages separated by | where the strategy gives its
// partition (flexible virtual pipeline parallelism: one segment per virtual stage), and its
// Mamba-2 mixers' flags (Megatron-Core's MambaMixer runs d_conv 4 and chunk_size 128).
void hybrid_args(const ModelSpec& model, const Strategy& s, Args& a, ExportResult& out) {
  std::string letters, mtp;
  const Mamba2Spec* mamba = nullptr;
  for (const auto& l : model.layers) {
    const TransformerLayer* b = l.block();
    if (!b) continue;
    if (b->mtp_vocab > 0) {
      // Each MTP depth's pattern after a / (hybrid_layer_allocation.py's MTP_SEPARATOR at
      // d98e8a64dd; Megatron-LM infers --mtp-num-layers from them).
      mtp += "/" + hybrid_mtp_pattern(*b);
      continue;
    }
    letters += hybrid_letter(*b);
    if (b->mamba.enabled() && !mamba) mamba = &b->mamba;
  }
  std::string pattern = letters;
  bool from_strategy = false;
  const auto segments = s.pp > 1 ? export_detail::pipeline_segments(model, s, out, &from_strategy)
                                 : std::vector<StageBlocks>{};
  if (!segments.empty()) {
    pattern.clear();
    for (const StageBlocks& seg : segments) {
      if (seg.blocks == 0)
        out.unsupported.push_back(
            "a pipeline stage without layers (the embedding or the head alone): "
            "--hybrid-layer-pattern has no empty segment");
      if (!pattern.empty()) pattern += '|';
      pattern +=
          letters.substr(static_cast<size_t>(seg.first_block), static_cast<size_t>(seg.blocks));
    }
  } else if (s.pp > 1) {
    out.approximations.push_back(
        "the strategy leaves the layer partition to hetplan: --hybrid-layer-pattern without | "
        "separators, Megatron-LM's even split");
  }
  a.add("--hybrid-layer-pattern", fmt::format("\"{}{}\"", pattern, mtp));
  if (!mamba) return;
  a.add("--mamba-num-heads", mamba->heads);
  a.add("--mamba-head-dim", mamba->head_dim);
  a.add("--mamba-state-dim", mamba->state);
  a.add("--mamba-num-groups", mamba->groups);
  if (mamba->conv_kernel != 4 || mamba->chunk != 128)
    out.approximations.push_back(fmt::format(
        "the Mamba-2 mixers' conv1d of {} taps and scan chunks of {} tokens: Megatron-Core's "
        "MambaMixer runs 4 and 128 (no flag sets them)",
        mamba->conv_kernel, mamba->chunk));
}

// Sliding-window attention: --window-size as Transformer Engine's (left, right) pair, a window of
// W keys being (W - 1, 0) (Megatron-Bridge's Gemma 2 bridge: sliding_window - 1), and where some
// layers attend to every earlier key, --window-attn-skip-freq's list (1: the window, 0: full).
void window_args(const MegatronBlocks& m, Args& a, ExportResult& out) {
  int64_t window = 0;
  bool full = false;
  std::vector<int> pattern;
  for (const TransformerLayer* b : m.decoder) {  // the list counts every layer
    pattern.push_back(b->window > 0 ? 1 : 0);
    if (!b->has_attention()) continue;
    if (b->window == 0) {
      full = true;
    } else if (window == 0) {
      window = b->window;
    } else if (b->window != window) {
      out.unsupported.push_back(
          fmt::format("sliding windows of {} and {} keys: Megatron-LM takes one --window-size",
                      window, b->window));
      return;
    }
  }
  if (window == 0) return;
  a.add("--window-size", fmt::format("\"{},0\"", window - 1));
  if (full) a.add("--window-attn-skip-freq", fmt::format("\"[{}]\"", fmt::join(pattern, ",")));
}

void model_args(const ModelSpec& model, const LayerSpec& layer, const Strategy& s, Args& a,
                ExportResult& out) {
  const TransformerLayer& b = *layer.block();
  const EmbeddingLayer& emb = *model.layers.front().embedding();
  const LmHeadLayer& head = *model.layers.back().head();
  const MegatronBlocks blocks = megatron_blocks(model);
  a.add("--num-layers", static_cast<int64_t>(blocks.decoder.size()));
  if (blocks.mtp > 0 && !blocks.hybrid) a.add("--mtp-num-layers", blocks.mtp);
  if (blocks.mtp_repeated) a.add("--mtp-use-repeated-layer");
  if (blocks.mtp > 0 && s.pp > 1)
    out.approximations.push_back(
        "Megatron-LM builds the multi-token-prediction layers on the last pipeline stage, beside "
        "its share of --num-layers; the partition flags count decoder layers only");
  if (blocks.hybrid) hybrid_args(model, s, a, out);
  if (blocks.moe) moe_args(blocks, s, a, out);
  a.add("--hidden-size", layer.hidden);
  a.add("--ffn-hidden-size", blocks.dense ? blocks.dense->ffn_hidden
                             : blocks.moe ? blocks.moe->ffn_hidden
                                          : b.ffn_hidden);
  a.add("--num-attention-heads", b.heads);
  if (b.mla.enabled())
    mla_args(b, a);
  else if (b.head_dim * b.heads != layer.hidden)
    a.add("--kv-channels", b.head_dim);
  if (b.qk_norm) a.add("--qk-layernorm");
  window_args(blocks, a, out);
  // GPT-OSS's learned sink logit per head (Megatron-Bridge's gpt_oss_bridge.py at 067f987df03b:
  // softmax_type learnable).
  if (b.attention_sinks) a.add("--softmax-type", "learnable");
  if (b.kv_heads != b.heads) {
    a.add("--group-query-attention");
    a.add("--num-query-groups", b.kv_heads);
  }
  a.add("--seq-length", model.seq_len);
  a.add("--max-position-embeddings", emb.max_positions > 0 ? emb.max_positions : model.seq_len);
  if (b.rotary)
    a.add("--position-embedding-type", "rope");
  else if (emb.max_positions == 0)
    a.add("--position-embedding-type", "none");
  if (b.norm == NormKind::kRmsNorm) a.add("--normalization", "RMSNorm");
  if (b.norm == NormKind::kNone) out.unsupported.push_back("blocks without normalisation");
  if (b.activation == MlpActivation::kSwiglu) a.add("--swiglu");
  if (b.activation == MlpActivation::kSquaredRelu) a.add("--squared-relu");
  if (b.activation == MlpActivation::kRelu)
    out.unsupported.push_back("ReLU MLPs (Megatron-LM has GeLU, SwiGLU and squared ReLU)");
  // --disable-bias-linear drops every projection's bias; --add-qkv-bias gives QKV alone one.
  if (!b.bias) a.add("--disable-bias-linear");
  if (b.bias != b.mlp_bias)
    out.unsupported.push_back(fmt::format(
        "biases on the {} projections only (Megatron-LM biases all four or none; QKV alone "
        "with --add-qkv-bias)",
        b.bias ? "attention" : "MLP"));
  if (!head.tied) a.add("--untie-embeddings-and-output-weights");
  a.add("--hidden-dropout", b.dropout);
  a.add("--attention-dropout", b.dropout);

  if (!b.causal || head.transform || emb.token_types > 0 || emb.norm != NormKind::kNone)
    out.unsupported.push_back(
        fmt::format("model {} is not a GPT-style decoder (pretrain_gpt.py); BERT-style models take "
                    "pretrain_bert.py's flags",
                    model.name));
  switch (model.dtype) {
    case Dtype::kBf16:
      a.add("--bf16");
      break;
    case Dtype::kFp16:
      a.add("--fp16");
      break;
    case Dtype::kFp32:
    case Dtype::kTf32:
      break;  // Megatron-LM's default precision
    default:
      out.unsupported.push_back(fmt::format("training in {}", to_string(model.dtype)));
  }
}

bool same_split(const std::vector<StageBlocks>& x, const std::vector<StageBlocks>& y) {
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i].blocks != y[i].blocks || x[i].embedding != y[i].embedding || x[i].head != y[i].head)
      return false;
  return true;
}

// --decoder-first/last-pipeline-num-layers for pp x v segments in model order (virtual stage j on
// pipeline rank j mod pp): Megatron-LM splits a rank's blocks evenly over its v chunks
// (get_num_layers_to_build), so every chunk of the first rank must hold first / v blocks, of the
// last rank last / v, and of every other rank one common count. nullopt when the segments are not
// so; {-1, -1} for the even split.
std::optional<std::pair<int64_t, int64_t>> first_last_per_rank(
    const std::vector<StageBlocks>& segments, int64_t pp) {
  const auto n = static_cast<int64_t>(segments.size());
  const int64_t v = n / pp;
  if (v == 1) return megatron_first_last(segments);
  // The blocks every chunk of pipeline ranks [from, to] holds; -1 when they differ.
  auto common = [&](int64_t from, int64_t to) {
    const int64_t b = segments[from].blocks;
    for (int64_t j = 0; j < n; ++j)
      if (j % pp >= from && j % pp <= to && segments[j].blocks != b) return int64_t{-1};
    return b;
  };
  const int64_t first = common(0, 0), last = common(pp - 1, pp - 1);
  if (first <= 0 || last <= 0) return std::nullopt;  // uneven chunks, or an embedding-only chunk
  if (pp == 2)
    return first == last ? std::make_pair(-1L, -1L) : std::make_pair(first * v, last * v);
  const int64_t middle = common(1, pp - 2);
  if (middle <= 0) return std::nullopt;
  return std::make_pair(first == middle ? -1L : first * v, last == middle ? -1L : last * v);
}

// Pipeline partition flags: nothing for the even split (--num-layers-per-virtual-pipeline-stage
// with chunks), --decoder-first/last-pipeline-num-layers for "uniform except the first and last
// pipeline rank" (with --num-virtual-stages-per-pipeline-rank, which Megatron-LM requires for an
// uneven split with chunks), else --pipeline-model-parallel-layout.
void partition_args(const ModelSpec& model, const Strategy& s, Args& a, ExportResult& out) {
  bool from_strategy = false;
  const auto segments = export_detail::pipeline_segments(model, s, out, &from_strategy);
  if (segments.empty()) {
    out.approximations.push_back(
        "the strategy leaves the layer partition to hetplan: Megatron-LM's even split is used "
        "(export a predict or search --json output to carry hetplan's partition)");
    return;
  }
  const int64_t blocks = model.num_blocks();
  const auto n = static_cast<int64_t>(segments.size());
  const int64_t v = n / s.pp;
  if (same_split(segments, even_split(blocks, n))) {
    if (v > 1) a.add("--num-layers-per-virtual-pipeline-stage", blocks / n);
    return;
  }
  if (const auto fl = first_last_per_rank(segments, s.pp)) {
    if (fl->first >= 0) a.add("--decoder-first-pipeline-num-layers", fl->first);
    if (fl->second >= 0) a.add("--decoder-last-pipeline-num-layers", fl->second);
    if (v > 1) a.add("--num-virtual-stages-per-pipeline-rank", v);
    return;
  }
  // Not "uniform except first and last": only the layout flag can say it.
  a.add("--pipeline-model-parallel-layout",
        fmt::format("\"{}\"", format_megatron_layout(segments)));
  if (from_strategy)
    out.approximations.push_back(fmt::format(
        "the partition is not uniform except the first and last {}, so it is written as "
        "--pipeline-model-parallel-layout, which only recent Megatron-LM versions have (older ones "
        "cannot express it)",
        v > 1 ? "pipeline rank's chunks" : "stage"));
  else
    out.approximations.push_back(fmt::format(
        "{} blocks do not divide into {} virtual stages: --pipeline-model-parallel-layout "
        "(recent Megatron-LM) gives the first ones one block more",
        blocks, n));
}

// Megatron-LM's interleaved schedule takes the micro-batches in groups of N =
// --microbatch-group-size-per-virtual-pipeline-stage (default pp: ModelParallelConfig
// __post_init__) and stops at its first step with N outside [pp, M] (ValueError) or a last group
// of 0 < M mod N < pp micro-batches (RuntimeError): megatron/core/pipeline_parallel/schedules.py,
// forward_backward_pipelining_with_interleaving. Versions before the group size refused any M that
// is no multiple of pp ("number of microbatches is not divisible by pipeline-model-parallel-size
// when using interleaved schedule"). The smallest N it takes for M; 0 when none (M < pp).
int64_t megatron_microbatch_group(int64_t pp, int64_t m) {
  for (int64_t n = pp; n <= m; ++n)
    if (m % n == 0 || m % n >= pp) return n;
  return 0;
}

// Virtual stages with a micro-batch count Megatron-LM's default grouping refuses: the nearest
// grouping it runs (groups of N instead of hetplan's groups of pp and a smaller last one), or
// not expressed with fewer micro-batches than pipeline ranks.
void microbatch_group_args(const Strategy& s, Args& a, ExportResult& out) {
  const int64_t m = s.microbatches();
  const int64_t n = megatron_microbatch_group(s.pp, m);
  if (n == s.pp) return;
  if (n == 0) {
    out.unsupported.push_back(fmt::format(
        "{} micro-batch{} over {} pipeline ranks with virtual stages: Megatron-LM's interleaved "
        "schedule needs at least pp micro-batches per iteration (schedules.py refuses fewer at "
        "the first step)",
        m, m == 1 ? "" : "es", s.pp));
    return;
  }
  a.add("--microbatch-group-size-per-virtual-pipeline-stage", n);
  out.approximations.push_back(fmt::format(
      "{} micro-batches are no multiple of pp {}: Megatron-LM's interleaved schedule refuses a "
      "last group of fewer than pp, so they run in groups of {} "
      "(--microbatch-group-size-per-virtual-pipeline-stage, recent Megatron-LM; older versions "
      "refuse them), where hetplan simulated groups of {} and a last one of {}",
      m, s.pp, n, s.pp, m % s.pp));
}

// The placement as comment lines and bash arrays a launch script can use.
std::string placement_text(const Strategy& s, const ExportOptions& o, ExportResult& out) {
  const auto p = export_detail::rank_placement(s, o.cluster);
  out.placement =
      export_detail::placement_lines(s, p, "Megatron-LM", export_detail::Launcher::kTorchrun);
  if (p.ranks.empty()) return "";
  std::string text;
  for (const auto& line : out.placement) text += "# placement: " + line + "\n";
  text += fmt::format("HETPLAN_RANK_DEVICES=({})  # hetplan device of rank r\n",
                      fmt::join(export_detail::rank_devices(p), " "));
  if (const auto ranks = export_detail::node_ranks(p); !ranks.empty())
    text += fmt::format(
        "HETPLAN_NODE_RANK=({})  # torchrun --node-rank of cluster node i (-1: unused)\n",
        fmt::join(ranks, " "));
  return text;
}

// CUDA_DEVICE_MAX_CONNECTIONS, which validate_args checks: with tp > 1 (or cp > 1) before
// Blackwell (compute capability < 10) it must be "1", except with an FSDP, which wants it unset
// or above 1 whatever the GPU (Megatron-FSDP asserts that, and only warns of the clash with tp).
// "1" is accepted on Blackwell as well, so the line does not depend on the cluster's GPUs.
std::string environment_text(const Strategy& s, ExportResult& out) {
  if (s.zero >= 2) {
    if (s.tp > 1)
      out.approximations.push_back(
          "tensor parallelism with Megatron-FSDP: before Blackwell Megatron-LM warns that tp wants "
          "CUDA_DEVICE_MAX_CONNECTIONS=1 while FSDP wants it above 1 (it is unset here, as FSDP "
          "requires), so tp communication may not overlap as hetplan predicted");
    out.instructions.push_back(
        "run the file in the shell that starts torchrun: it unsets CUDA_DEVICE_MAX_CONNECTIONS, "
        "which Megatron-FSDP requires unset or above 1");
    return "# Megatron-FSDP requires CUDA_DEVICE_MAX_CONNECTIONS unset or above 1 (validate_args)\n"
           "unset CUDA_DEVICE_MAX_CONNECTIONS\n";
  }
  if (s.tp <= 1 && s.cp <= 1) return "";
  out.instructions.push_back(
      "run the file in the shell that starts torchrun: it exports CUDA_DEVICE_MAX_CONNECTIONS=1, "
      "without which Megatron-LM's validate_args stops tensor and context parallelism before "
      "Blackwell");
  const char* what = s.cp <= 1   ? "tensor parallelism"
                     : s.tp <= 1 ? "context parallelism"
                                 : "tensor and context parallelism";
  return fmt::format(
      "# {}: validate_args requires CUDA_DEVICE_MAX_CONNECTIONS=1 before Blackwell (compute "
      "capability < 10); later GPUs accept it\n"
      "export CUDA_DEVICE_MAX_CONNECTIONS=1\n",
      what);
}

}  // namespace

ExportResult export_megatron(const ModelSpec& model, const Strategy& s, const ExportOptions& o) {
  ExportResult out;
  Args a;
  const LayerSpec* layer = megatron_block(model, out);
  if (layer) model_args(model, *layer, s, a, out);
  a.add("--tensor-model-parallel-size", s.tp);
  a.add("--pipeline-model-parallel-size", s.pp);
  parallel_and_precision_args(model, s, a, out);
  host_args(s, a, out);
  export_detail::lora_notes(s, "Megatron-LM's arguments have no PEFT (every parameter would train)",
                            out);
  if (s.lora.enabled())
    out.instructions.push_back(fmt::format(
        "LoRA runs through Megatron-Bridge on these parallel settings: cfg.peft = LoRA(target_"
        "modules=[{}], dim={}, alpha={}) (megatron.bridge.peft.lora at 067f987df03b)",
        export_detail::lora_targets_text(s.lora), s.lora.rank, s.lora.rank));
  if (s.pp > 1) {
    if (s.schedule == "gpipe")
      out.approximations.push_back(
          "schedule gpipe: Megatron-LM runs 1F1B (same bubble, fewer "
          "activations held)");
    else if (s.schedule != "1f1b" && s.schedule != "interleaved")
      out.unsupported.push_back(fmt::format(
          "schedule {}: Megatron-LM runs 1F1B and interleaved 1F1B only{}", s.schedule,
          s.chunks > 1 ? fmt::format(" (its {} chunks per rank are written as interleaved virtual "
                                     "stages, which Megatron-LM places round-robin, not in a V)",
                                     s.chunks)
                       : ""));
    if (s.schedule == "interleaved" && s.chunks < 2)
      out.unsupported.push_back("schedule interleaved with chunks 1");
    if (layer && !model.is_hybrid()) partition_args(model, s, a, out);
    if (s.chunks > 1) microbatch_group_args(s, a, out);
    if (s.chunks > 1 && s.pp == 2) {
      // validate_args: interleaving over 2 pipeline ranks needs p2p overlap, which is on unless
      // --no-overlap-p2p-communication is given (there is no flag that turns it on).
      out.approximations.push_back(
          "Megatron-LM interleaves 2 pipeline ranks only with p2p overlap, its default (do not "
          "pass --no-overlap-p2p-communication); older versions refuse interleaving over 2 ranks");
    }
  }
  a.add("--micro-batch-size", s.micro_batch);
  a.add("--global-batch-size", s.global_batch);
  if (s.sequence_parallel && s.tp > 1) a.add("--sequence-parallel");
  if (s.recompute == Recompute::kSelective) {
    a.add("--recompute-granularity", "selective");
    // Megatron-Core's default --recompute-modules is core_attn: other sets are spelled out.
    if (const Recomputation r = s.recomputation(); r.modules != OpGroup::kCoreAttention) {
      std::vector<std::string_view> names;
      for (RecomputeModule m : modules_of(r.modules)) names.push_back(to_string(m));
      a.add("--recompute-modules", fmt::format("{}", fmt::join(names, " ")));
    }
  } else if (s.recompute == Recompute::kOp) {
    out.unsupported.push_back(
        "per-op selective recomputation (recompute op, torchtitan's SelectiveAC): Megatron-Core "
        "recomputes modules (--recompute-modules) or whole blocks; no recomputation written");
  } else if (s.recompute == Recompute::kFull) {
    a.add("--recompute-granularity", "full");
    if (s.recompute_num_layers > 0) {  // the first N blocks of each stage (TransformerConfig)
      a.add("--recompute-method", "block");
      a.add("--recompute-num-layers", s.recompute_num_layers);
    } else {
      a.add("--recompute-method", "uniform");
      a.add("--recompute-num-layers", 1);
    }
  }
  if (s.zero == 1) {
    a.add("--use-distributed-optimizer");
  } else if (s.zero >= 2) {
    a.add("--use-megatron-fsdp");
    a.add("--data-parallel-sharding-strategy", s.zero == 2 ? "optim_grads" : "optim_grads_params");
    // validate_args: "Megatron FSDP only supports fsdp_dtensor checkpoint format".
    a.add("--ckpt-format", "fsdp_dtensor");
  }
  if (!s.grad_accumulation_fusion) a.add("--no-gradient-accumulation-fusion");
  // Megatron-LM reduces gradients after the backward unless told to overlap (its default is off).
  if (s.dp > 1 && s.overlap_grad_reduce) a.add("--overlap-grad-reduce");
  // Gradients held and reduced in bf16 (Megatron-Bridge's performance recipes' grad_reduce_in_fp32
  // = False); fp32 is Megatron-LM's default for bf16 training.
  if (!s.fp32_grad_reduce && model.dtype == Dtype::kBf16) a.add("--grad-reduce-in-bf16");
  // Megatron-LM reads no --use-flash-attn (it is still parsed): --attention-backend picks the
  // kernel. auto lets Transformer Engine take FlashAttention or cuDNN fused attention, whichever
  // runs the shape (language_module.py enables NVTE_FLASH_ATTN and NVTE_FUSED_ATTN for it).
  a.add("--attention-backend", s.flash_attention ? "auto" : "unfused");
  if (o.fused_cross_entropy) {
    a.add("--cross-entropy-loss-fusion");
    a.add("--cross-entropy-fusion-impl", "te");
  }

  std::string text = fmt::format(
      "# Megatron-LM arguments for {}: {}\n"
      "# exported by hetplan. Launch on {} GPUs (Megatron-LM derives the data-parallel size {} "
      "from them), e.g.\n"
      "#   torchrun --nproc-per-node <GPUs per node> --nnodes <nodes> {} "
      "\"${{MEGATRON_ARGS[@]}}\" "
      "<data, tokenizer, optimizer flags>\n",
      model.name, export_detail::strategy_summary(s), s.devices(), s.dp,
      model.is_hybrid() ? "pretrain_hybrid.py" : "pretrain_gpt.py");
  if (const auto* emb = model.layers.front().embedding())
    text += fmt::format("# vocabulary {}: from the tokenizer\n", emb->vocab);
  const std::string environment = environment_text(s, out);
  for (const auto& note : out.approximations) text += "# note: " + note + "\n";
  for (const auto& no : out.unsupported) text += "# NOT EXPRESSED: " + no + "\n";
  text += placement_text(s, o, out);
  text += environment;
  text += "MEGATRON_ARGS=(\n";
  for (const auto& line : a.lines) text += "  " + line + "\n";
  text += ")\n";
  out.text = text;
  return out;
}

}  // namespace hetplan
