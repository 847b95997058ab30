// Autocast over fp32 parameters (presets/frameworks/pytorch.yaml, `precision: autocast`): what a
// layer launches, moves and keeps (costmodel/layer_ops.cpp), worked out by hand from the plain
// PyTorch harness's operators (scripts/reference/plain.py, traced by scripts/harness_vs_model.py
// --style pytorch), and the framework file's new keys.
#include <string>

#include <gtest/gtest.h>

#include "costmodel/document.h"
#include "costmodel/errors.h"
#include "costmodel/framework.h"
#include "costmodel/layer_ops.h"
#include "costmodel/memory.h"
#include "costmodel/model.h"

namespace hetplan {
namespace {

const FrameworkSpec& pytorch() {
  static const FrameworkSpec kPytorch = load_framework("pytorch");
  return kPytorch;
}

LayerShape shape(const FrameworkSpec* framework, int64_t microbatches) {
  LayerShape s;
  s.micro_batch = 1;
  s.grad_accumulation_fusion = false;
  s.framework = framework;
  s.microbatches = microbatches;
  return s;
}

std::string tiny_llama() {
  return std::string(HETPLAN_SOURCE_DIR) + "/examples/models/tiny-llama.yaml";
}

double bytes_of(const LayerWork& w, const std::string& kernel) {
  double total = 0;
  for (const auto& m : w.memory_ops)
    if (m.kernel == kernel) total += m.bytes;
  return total;
}

// A GPT-2 medium block (h 1024, 16 heads, MLP 4096, biases, GeLU, dropout, fused attention) under
// autocast, its kernels counted by hand (the CPU trace of the plain harness lists the same
// operators, with LayerNorm's backward as one aten operator where hetplan counts two kernels):
// forward: per linear a weight cast and a bias cast (4 x 2), an input cast for QKV and fc1 (2),
//   2 layernorms, 4 GEMMs, attention, GeLU, 2 dropouts, 2 residual adds = 22;
// input gradient: 4 GEMMs, 2 layernorms, attention, QKV gradient concat, GeLU, 2 dropouts, 2
//   residual-gradient adds, 2 casts of the stream's gradient for the branch, 2 casts of the
//   inputs' gradients back to fp32 = 17;
// weight gradient: 4 GEMMs, 4 bias gradients, 2 layernorm gains, 4 weight and 4 bias gradient
//   casts = 18, plus autograd's add into .grad for 12 tensors in 1 of 2 micro-batches: 6.
TEST(Autocast, AGpt2BlockLaunchesTheKernelsCountedByHand) {
  const ModelSpec model = load_model("gpt2-medium");
  const LayerSpec& block = model.layers[1];
  const LayerWork w = layer_work(block, shape(&pytorch(), 2));
  const LayerKernels k = layer_kernels(w, Recompute::kNone);
  EXPECT_EQ(k.pass[0], 22);
  EXPECT_EQ(k.pass[1], 17);
  EXPECT_EQ(k.pass[2], 18 + 6);
  EXPECT_DOUBLE_EQ(w.accumulate_share, 0.5);
  // Full recomputation re-runs the forward, casts included.
  EXPECT_EQ(layer_kernels(w, Recompute::kFull).recompute, 22);
  // One micro-batch: its gradients become .grad, nothing is added.
  const LayerWork one = layer_work(block, shape(&pytorch(), 1));
  EXPECT_EQ(bytes_of(one, "grad_accumulate"), 0);
  EXPECT_EQ(layer_kernels(one, Recompute::kNone).pass[2], 18);
}

// What autocast adds to a GPT-2 block's bytes, against the same block in half precision: the
// fp32 stream doubles the norms' and the residual adds' values, every weight is cast per forward
// (4 B read, 2 B written) and its gradient back, and 3 of 4 micro-batches add 12 B per parameter.
TEST(Autocast, AGpt2BlockMovesAndKeepsWhatTheHarnessDoes) {
  const ModelSpec model = load_model("gpt2-medium");
  const LayerSpec& block = model.layers[1];
  const LayerWork w = layer_work(block, shape(&pytorch(), 4));
  const LayerWork half = layer_work(block, shape(nullptr, 0));
  const double T = 1024, h = 1024;
  const double weights = 12 * h * h;  // QKV 3h^2, projection h^2, fc1 and fc2 4h^2 each
  const double biases = 3 * h + h + 4 * h + h;
  EXPECT_DOUBLE_EQ(bytes_of(w, "autocast_weight_cast"), weights * 6);
  EXPECT_DOUBLE_EQ(bytes_of(w, "autocast_weight_grad_cast"), weights * 6);
  EXPECT_DOUBLE_EQ(bytes_of(w, "autocast_bias_cast"), biases * 6);
  EXPECT_DOUBLE_EQ(bytes_of(w, "autocast_input_cast"), 2 * T * h * 6);  // QKV's and fc1's input
  EXPECT_DOUBLE_EQ(bytes_of(w, "autocast_input_grad_cast"), 2 * T * h * 6);
  EXPECT_DOUBLE_EQ(bytes_of(w, "autocast_residual_grad_cast"), 2 * T * h * 6);
  // Residual add: fp32 stream and bf16 branch read, fp32 written; its gradient add in fp32.
  EXPECT_DOUBLE_EQ(bytes_of(w, "residual_add"), 2 * T * h * 10);
  EXPECT_DOUBLE_EQ(bytes_of(w, "residual_grad_add"), 2 * T * h * 12);
  // LayerNorm (hetplan's fused kernel) over fp32: twice the half-precision bytes of its values.
  EXPECT_DOUBLE_EQ(bytes_of(w, "layernorm_fwd"), 2 * (2 * T * h * 4 + T * 8));
  EXPECT_DOUBLE_EQ(bytes_of(w, "grad_accumulate"), (weights + biases + 4 * h) * 12 * 0.75);
  // Kept for backward: the norms' fp32 inputs (2 B more per value each) and the weights' bf16
  // casts; the casts of the inputs are what the half-precision block keeps as the GEMMs' inputs.
  EXPECT_DOUBLE_EQ(w.activation(Recompute::kNone) - half.activation(Recompute::kNone),
                   2 * T * h * 2 + weights * 2);
  // Full recomputation keeps the block's fp32 input only.
  EXPECT_DOUBLE_EQ(w.activation(Recompute::kFull), T * h * 4);
  EXPECT_DOUBLE_EQ(w.output_bytes, T * h * 4);
}

// The LLaMA-style families: RMSNorm keeps its fp32 normalised input beyond hetplan's count, SwiGLU
// its silu output, rotary the bf16 casts of Q and K (V, a view, keeps the QKV output alive).
TEST(Autocast, EagerFamiliesKeepWhatTheirRecipesSay) {
  const ModelSpec model = load_model(tiny_llama());
  const LayerSpec& block = model.layers[1];
  const LayerWork w = layer_work(block, shape(&pytorch(), 2));
  // tiny-llama: hidden 64, 4 heads and 2 KV heads of 16, MLP 176, sequence 32, no biases.
  const double T = 32, h = 64, f = 176, rotated = T * (4 + 2) * 16;
  const double weights = (4 + 2 * 2) * 16 * h + h * 64 + 2 * f * h + f * h;
  const double expected =
      2 * (T * h * 4 + T * 8 + T * h * 4)  // two norms: fp32 input, statistics, normalised input
      + 2 * T * h * 2                      // the bf16 casts of QKV's and fc1's inputs
      + T * (4 + 2 * 2) * 16 * 2           // Q, K, V (the QKV output)
      + rotated * 2                        // the bf16 casts of the rotated Q and K
      + 4 * T * 4                          // logsumexp, fp32 per head and token
      + T * h * 2                          // the projection's input
      + T * 2 * f * 2 + T * f * 2          // SwiGLU's input and its silu output
      + T * f * 2                          // fc2's input
      + weights * 2;                       // the weights' bf16 casts
  EXPECT_DOUBLE_EQ(w.activation(Recompute::kNone), expected);
  EXPECT_DOUBLE_EQ(bytes_of(w, "eager_swiglu_fwd"), T * f * 5 * 2);
  EXPECT_DOUBLE_EQ(bytes_of(w, "eager_rotary_fwd"), rotated * (6 * 2 + 6 * 4));
  EXPECT_DOUBLE_EQ(bytes_of(w, "eager_rmsnorm_fwd"), 2 * T * h * 7 * 4);
}

TEST(Autocast, TheLossHoldsTwoFp32GradientsOfTheLogits) {
  const ModelSpec model = load_model(tiny_llama());
  const LayerWork w = layer_work(model.layers.back(), shape(&pytorch(), 2));
  const double logits = 32.0 * 512;  // tokens x vocabulary (512, a multiple of 128)
  EXPECT_DOUBLE_EQ(w.transient_bytes, logits * 4);
  EXPECT_DOUBLE_EQ(bytes_of(w, "eager_cross_entropy_fwd"), logits * (2 + 3 * 4));
  EXPECT_EQ(layer_work(model.layers.back(), shape(nullptr, 0)).transient_bytes, 0);
}

TEST(Autocast, TwoBytesFewerPerParameterThanMegatron) {
  // fp32 weights and .grad, two fp32 moments, no master copy: 16 B per parameter, not 18.
  MemoryInput in;
  in.param_count = 1e9;
  in.layout = &pytorch().memory;
  const MemoryBreakdown m = device_memory(in);
  EXPECT_DOUBLE_EQ(m.weights + m.gradients + m.optimizer, 16e9);
  in.layout = nullptr;
  const MemoryBreakdown megatron = device_memory(in);
  EXPECT_DOUBLE_EQ(megatron.weights + megatron.gradients + megatron.optimizer, 18e9);
}

FrameworkSpec parse(const std::string& extra, const std::string& ops = "") {
  const std::string text = R"(description: "x"
version: "x"
export: none
)" + extra + R"(
can_run: {schedules: [1f1b], recompute: [none], zero: [0], zero_with_pipeline: [0],
  tensor_parallel: false, sequence_parallel: false, tp_comm_overlap: false, p2p_overlap: true,
  overlap_grad_reduce: [false], grad_accumulation_fusion: [false], attention: [fused],
  host_modes: [eager]}
defaults: {flash_attention: true, grad_accumulation_fusion: false, overlap_grad_reduce: false,
  tp_comm_overlap: false, fp32_grad_reduce: true, host_mode: eager}
)" + ops + R"(
host_s_per_kernel: {eager: 0}
memory: {reported_peak: allocated, states: {bf16: {weights: 4, gradients: 4, master: 0,
  optimizer: 8}}, sharding: {}, cast_copy_bytes: 0, fragmentation: 0, context_bytes: 0,
  communicator_bytes: 0}
sources: {can_run: "a", defaults: "a", host_s_per_kernel: "a", memory: "a", ops: "a",
  precision: "a"}
)";
  return parse_framework(parse_document(text, "f.yaml", DocumentFormat::kYaml), "f");
}

TEST(Autocast, FrameworkFilesDeclarePrecisionHarnessAndWhatOpsKeep) {
  EXPECT_EQ(parse("").param_precision, ParamPrecision::kHalf);
  EXPECT_EQ(parse("").harness, "");
  const FrameworkSpec f = parse("precision: autocast\nharness: pytorch",
                                "ops: {rmsnorm: {forward: {launches: 6, fp32_values: 7}, "
                                "weight: {launches: 0}, kept: {fp32_values: 1}}}");
  EXPECT_EQ(f.param_precision, ParamPrecision::kAutocast);
  EXPECT_EQ(f.harness, "pytorch");
  const OpRecipe* r = f.recipe("rmsnorm", HostMode::kEager);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->weight->launches, 0);
  EXPECT_DOUBLE_EQ(r->kept.fp32_values, 1);
  EXPECT_THROW(parse("precision: fp8"), InputError);
  EXPECT_THROW(parse("harness: megatron"), InputError);
  // A pass of no kernels moves nothing; a kept entry names what it keeps.
  EXPECT_THROW(parse("", "ops: {rmsnorm: {weight: {launches: 0, fp32_values: 1}}}"), InputError);
  EXPECT_THROW(parse("", "ops: {rmsnorm: {forward: {launches: 1}}}"), InputError);
  EXPECT_THROW(parse("", "ops: {swiglu: {kept: {}}}"), InputError);
}

}  // namespace
}  // namespace hetplan
