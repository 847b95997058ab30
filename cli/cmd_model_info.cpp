// hetplan model-info: every layer of a model with all its fields, so that other tools (the PyTorch
// reference harness, scripts/reference_train.py) build exactly the model hetplan predicts.
#include <optional>

#include <fmt/format.h>

#include "cli/cmd_model_info.h"
#include "cli/command.h"
#include "cli/common.h"
#include "cli/validators.h"
#include "costmodel/errors.h"
#include "costmodel/framework.h"
#include "costmodel/layer_ops.h"
#include "costmodel/model.h"
#include "costmodel/whole_number.h"

namespace hetplan::cli {
namespace {

constexpr int kModelInfoSchema = 1;

Json layer_json(const LayerSpec& l, size_t index) {
  Json j = {{"index", index},
            {"name", l.name},
            {"kind", to_string(l.kind())},
            {"hidden", l.hidden},
            {"seq_len", l.seq_len},
            {"parameters", layer_parameters(l, 1, /*unique=*/true)}};
  if (const auto* e = l.embedding()) {
    j["vocab"] = e->vocab;
    j["max_positions"] = e->max_positions;
    j["token_types"] = e->token_types;
    j["norm"] = to_string(e->norm);
    j["dropout"] = e->dropout;
  } else if (const auto* b = l.block()) {
    j["heads"] = b->heads;
    j["kv_heads"] = b->kv_heads;
    j["head_dim"] = b->head_dim;
    j["ffn_hidden"] = b->ffn_hidden;
    j["activation"] = to_string(b->activation);
    j["norm"] = to_string(b->norm);
    j["bias"] = b->bias;
    j["mlp_bias"] = b->mlp_bias;
    j["rotary"] = b->rotary;
    j["causal"] = b->causal;
    j["dropout"] = b->dropout;
    j["experts"] = b->experts;
    j["top_k"] = b->top_k;
    j["qkv_bias"] = b->qkv_biased();
    j["window"] = b->window;
    j["qk_norm"] = b->qk_norm;
    j["post_norms"] = b->post_norms;
    j["attn_softcap"] = b->attn_softcap;
    j["attention_sinks"] = b->attention_sinks;
    if (b->mla.enabled())
      j["mla"] = {{"q_lora_rank", b->mla.q_lora_rank},
                  {"kv_lora_rank", b->mla.kv_lora_rank},
                  {"qk_nope_head_dim", b->mla.qk_nope_head_dim},
                  {"qk_rope_head_dim", b->mla.qk_rope_head_dim},
                  {"v_head_dim", b->mla.v_head_dim}};
    j["shared_experts"] = b->shared_experts;
    j["shared_ffn_hidden"] = b->shared_ffn_hidden;
    j["shared_expert_gate"] = b->shared_expert_gate;
    j["moe_latent"] = b->moe_latent;
    j["mtp"] = b->mtp_vocab > 0;
    j["mtp_repeat"] = b->mtp_repeat;
    if (const Mamba2Spec& m = b->mamba; m.enabled())
      j["mamba"] = {{"heads", m.heads},   {"head_dim", m.head_dim},       {"state", m.state},
                    {"groups", m.groups}, {"conv_kernel", m.conv_kernel}, {"chunk", m.chunk}};
  } else if (const auto* h = l.head()) {
    j["vocab"] = h->vocab;
    j["final_norm"] = to_string(h->final_norm);
    j["tied"] = h->tied;
    j["transform"] = h->transform;
    j["output_bias"] = h->output_bias;
    j["logit_softcap"] = h->logit_softcap;
    j["parameters_with_tied_copy"] = layer_parameters(l, 1, /*unique=*/false);
  }
  return j;
}

std::string layer_line(const LayerSpec& l) {
  if (const auto* e = l.embedding())
    return fmt::format("embedding  vocab {} positions {} token types {} norm {} dropout {}",
                       e->vocab, e->max_positions, e->token_types, to_string(e->norm), e->dropout);
  if (const auto* b = l.block()) {
    if (const Mamba2Spec& m = b->mamba; m.enabled())
      return fmt::format(
          "mamba2     hidden {} seq {} heads {} head_dim {} state {} groups {} conv {} chunk {} {}",
          l.hidden, l.seq_len, m.heads, m.head_dim, m.state, m.groups, m.conv_kernel, m.chunk,
          to_string(b->norm));
    std::string extra;
    if (b->window > 0) extra += fmt::format(" window {}", b->window);
    if (b->mla.enabled())
      extra += fmt::format(" mla q{} kv{} rope{} v{}", b->mla.q_lora_rank, b->mla.kv_lora_rank,
                           b->mla.qk_rope_head_dim, b->mla.v_head_dim);
    if (b->qk_norm) extra += " qk-norm";
    if (b->post_norms) extra += " post-norms";
    if (b->attn_softcap > 0) extra += fmt::format(" softcap {}", b->attn_softcap);
    if (b->attention_sinks) extra += " sinks";
    if (b->shared_experts > 0)
      extra += fmt::format(" shared {}x{}", b->shared_experts, b->shared_ffn_hidden);
    if (b->moe_latent > 0) extra += fmt::format(" latent {}", b->moe_latent);
    if (b->mtp_vocab > 0) extra += b->mtp_repeat ? " mtp (repeats the one before)" : " mtp";
    return fmt::format(
        "{}      hidden {} seq {} heads {} kv heads {} head_dim {} ffn {} {} {}{}{}{} "
        "dropout {}{}{}",
        b->mtp_vocab > 0 ? "mtp  " : "block", l.hidden, l.seq_len, b->heads, b->kv_heads,
        b->head_dim, b->ffn_hidden, to_string(b->activation), to_string(b->norm),
        b->bias ? " bias" : (b->qkv_bias ? " qkv-bias" : ""), b->rotary ? " rotary" : "",
        b->causal ? " causal" : " bidirectional", b->dropout,
        b->experts > 1 ? fmt::format(" experts {} top-{}", b->experts, b->top_k) : std::string(),
        extra);
  }
  const auto& h = std::get<LmHeadLayer>(l.op);
  return fmt::format("lm_head    vocab {} final norm {}{}{}{}", h.vocab, to_string(h.final_norm),
                     h.tied ? " tied" : "", h.transform ? " transform" : "",
                     h.output_bias ? " output-bias" : "");
}

// Under per-op recomputation (a framework's op_recompute), the share of the forward's work on the
// layer's GEMMs, by FLOPs, that runs again in backward (0 without it).
double op_rerun_share(const LayerWork& w) {
  double all = 0, rerun = 0;
  for (const auto& g : w.gemms)
    if (g.pass == Pass::kForward) {
      all += g.shape.flops();
      rerun += g.shape.flops() * g.op_rerun;
    }
  return all > 0 ? rerun / all : 0;
}

// One layer's work as the cost model decomposes it (costmodel/layer_ops.h), for tools that compare
// it with what a framework runs (scripts/harness_vs_model.py).
Json work_json(const LayerWork& w, bool op_policy) {
  Json gemms = Json::array(), memory = Json::array(), attention = Json::array(),
       comms = Json::array();
  for (const auto& g : w.gemms) {
    Json j = to_json(g.shape);
    j.update({{"name", g.name},
              {"pass", to_string(g.pass)},
              {"flops", g.shape.flops()},
              {"core_attention", intersects(g.group, OpGroup::kCoreAttention)}});
    if (g.streams > 0) j["streams"] = g.streams;  // per-expert GEMMs: batch kernels of their own
    gemms.push_back(std::move(j));
  }
  for (const auto& m : w.memory_ops)
    memory.push_back(
        {{"kernel", m.kernel},
         {"pass", to_string(m.pass)},
         {"bytes", whole_number_json(m.bytes)},
         // Kernels it launches per micro-batch (one per accumulated tensor for the
         // gradient add, of the micro-batches that add).
         {"launches", m.kernel == "grad_accumulate"
                          ? static_cast<double>(w.accumulated_tensors) * w.accumulate_share
                          : static_cast<double>(m.launches)},
         {"core_attention", intersects(m.group, OpGroup::kCoreAttention)}});
  for (const auto& a : w.attention)
    attention.push_back({{"pass", to_string(a.pass)},
                         {"batch", a.batch},
                         {"heads", a.heads},
                         {"kv_heads", a.kv_heads},
                         {"seq_len", a.seq_len},
                         {"head_dim", a.head_dim},
                         {"causal", a.causal},
                         {"flops", a.flops}});
  for (const auto& c : w.comms)
    comms.push_back({{"name", c.name},
                     {"pass", to_string(c.pass)},
                     {"kind", to_string(c.kind)},
                     {"bytes", whole_number_json(c.bytes)}});
  Json out = {{"gemms", gemms},
              {"memory_ops", memory},
              {"attention", attention},
              {"comms", comms},
              {"activation_bytes",
               {{"none", whole_number_json(w.activation(Recompute::kNone))},
                {"selective", whole_number_json(w.activation(Recompute::kSelective))},
                {"full", whole_number_json(w.activation(Recompute::kFull))}}},
              {"output_bytes", whole_number_json(w.output_bytes)},
              {"transient_bytes", whole_number_json(w.transient_bytes)},
              {"params", w.params},
              {"model_flops", {w.model_flops[0], w.model_flops[1], w.model_flops[2]}}};
  if (op_policy) {  // the framework recomputes per op (its op_recompute)
    out["activation_bytes"]["op"] = whole_number_json(w.activation(Recompute::kOp));
    out["op_rerun_share"] = op_rerun_share(w);
  }
  return out;
}

}  // namespace

Json model_info_json(const ModelSpec& m) {
  Json layers = Json::array();
  for (size_t i = 0; i < m.layers.size(); ++i) layers.push_back(layer_json(m.layers[i], i));
  return {{"format", "hetplan-model-info"},
          {"schema_version", kModelInfoSchema},
          {"name", m.name},
          {"description", m.description},
          {"source", m.source},
          {"origin", m.origin},
          {"seq_len", m.seq_len},
          {"dtype", to_string(m.dtype)},
          {"parameters", m.parameters()},
          // What one token's forward multiplies (routed experts it is not sent to and the input
          // embedding's table left out), and the same with the table (costmodel/model.h).
          {"activated_parameters", m.activated_parameters()},
          {"activated_parameters_with_embedding", m.activated_parameters(true)},
          {"blocks", m.num_blocks()},
          // Costs use Megatron-LM's padded vocabulary (a multiple of 128 x tp); parameter counts
          // and model FLOPs the real one (costmodel/layer_ops.cpp).
          {"vocab_pad_multiple", 128},
          {"layers", layers}};
}

CommandRunner declare_model_info(CLI::App& app) {
  struct Options {
    std::string model, json;
    int64_t seq_len = 0;
    bool work = false;
    LayerShape shape;
    bool no_flash = false;
    bool no_fusion = false;
    std::string framework;
  };
  auto o = std::make_shared<Options>();
  app.add_option("--model", o->model, "Model preset, model file or Hugging Face config.json")
      ->required();
  app.add_option("--seq-len", o->seq_len, "Sequence length (default: the model's)")
      ->check(kPositive);
  app.add_option("--json", o->json, "Write the layer list as JSON to FILE ('-' for stdout)")
      ->expected(0, 1)
      ->default_str("-");
  CLI::Option* work =
      app.add_flag("--work", o->work,
                   "Add each layer's work to the JSON as the cost model sees it: GEMMs, "
                   "memory-bound kernels with bytes, attention, tensor-parallel collectives, "
                   "activation bytes");
  app.add_option("--micro-batch", o->shape.micro_batch, "Micro-batch size for --work")
      ->default_val(1)
      ->check(kPositive)
      ->needs(work);
  app.add_option("--tp", o->shape.tp, "Tensor-parallel width for --work")
      ->default_val(1)
      ->check(kPositive)
      ->needs(work);
  app.add_flag("--sequence-parallel", o->shape.sequence_parallel, "Sequence parallelism (--work)")
      ->needs(work);
  app.add_flag("--no-flash-attention", o->no_flash, "Unfused attention (--work)")->needs(work);
  app.add_flag("--no-grad-accumulation-fusion", o->no_fusion,
               "Every gradient added into the fp32 main gradients by a kernel (--work)")
      ->needs(work);
  app.add_option("--framework", o->framework,
                 "The work as this framework runs it: its kernels and precision (--work; "
                 "default: hetplan's fused kernels)")
      ->needs(work);
  app.add_option("--microbatches", o->shape.microbatches,
                 "Micro-batches per iteration, for a framework whose autograd adds the "
                 "gradients of all but the first (--work)")
      ->check(kPositive)
      ->needs(work);
  return [o]() {
    check_outputs({o->model}, {{"--json", o->json}});
    const ModelSpec m = load_model(o->model, o->seq_len);
    if (o->work && o->json.empty())
      throw InputError("--work: the work is written as JSON only (give --json FILE or -)");
    if (o->work)
      if (const std::string why = tensor_parallel_problem(m, o->shape.tp); !why.empty())
        throw InputError(fmt::format("{}: --{}", m.origin, why));  // "tp N does not divide ..."
    if (!o->json.empty()) {
      Json j = model_info_json(m);
      if (o->work) {
        LayerShape shape = o->shape;
        std::optional<FrameworkSpec> framework;
        if (!o->framework.empty()) framework = load_framework(o->framework);
        shape.framework = framework ? &*framework : nullptr;
        shape.flash_attention = !o->no_flash;
        shape.grad_accumulation_fusion =
            !o->no_fusion && (!framework || framework->defaults.grad_accumulation_fusion);
        shape.dtype = m.dtype;  // layer_work names a tp that does not divide a layer
        j["work_shape"] = {{"micro_batch", shape.micro_batch},
                           {"tp", shape.tp},
                           {"sequence_parallel", shape.sequence_parallel},
                           {"flash_attention", shape.flash_attention},
                           {"grad_accumulation_fusion", shape.grad_accumulation_fusion},
                           {"dtype", to_string(shape.dtype)}};
        if (framework) {
          j["work_shape"]["framework"] = framework->name;
          j["work_shape"]["microbatches"] = shape.microbatches;
        }
        for (size_t i = 0; i < m.layers.size(); ++i)
          j["layers"][i]["work"] =
              work_json(layer_work(m.layers[i], shape), framework && framework->op_recompute);
      }
      write_json_output(j, o->json);
      if (o->json == "-") return 0;
    }
    fmt::print("{}: {:.3f}B parameters{}, {} blocks, sequence {}, {} ({})\n", m.name,
               m.parameters() / 1e9,
               m.is_moe() ? fmt::format(" ({:.3f}B activated)", m.activated_parameters() / 1e9)
                          : std::string(),
               m.num_blocks(), m.seq_len, to_string(m.dtype), m.description);
    // Consecutive identical layers are printed once.
    for (size_t i = 0; i < m.layers.size();) {
      size_t j = i + 1;
      const std::string line = layer_line(m.layers[i]);
      while (j < m.layers.size() && layer_line(m.layers[j]) == line) ++j;
      const std::string range = j - i > 1 ? fmt::format("{}-{}", i, j - 1) : fmt::format("{}", i);
      fmt::print("  {:>7} {}\n", range, line);
      i = j;
    }
    return 0;
  };
}

}  // namespace hetplan::cli
