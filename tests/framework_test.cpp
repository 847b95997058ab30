// Frameworks as data (docs/frameworks.md): the presets load with a source for every value, what
// each can run reaches the rules and the search, its memory layout reaches device_memory, its
// kernels reach a layer's work, and its p2p and host cost reach the prediction.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "costmodel/cost_model.h"
#include "costmodel/framework.h"
#include "costmodel/layer_ops.h"
#include "costmodel/memory.h"
#include "costmodel/model.h"
#include "costmodel/profile.h"
#include "search/eval/steps.h"
#include "search/evaluate.h"
#include "search/rules.h"
#include "search/search.h"
#include "test_util.h"
#include "tests/framework_fixture.h"

namespace hetplan {
namespace {

using testing::contains;
using testing::error_of;

std::string write_framework(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / (name + ".yaml");
  std::ofstream(path) << text;
  return path.string();
}

// The fixture with one line replaced: a file to break a rule of the loader with.
std::string fixture_with(const std::string& from, const std::string& to) {
  std::ifstream in(std::string(HETPLAN_TEST_DATA) + "/framework_fixture.yaml");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(Framework, EveryPresetLoadsWithItsSourcesAndIsListed) {
  const auto presets = framework_presets();
  std::vector<std::string> names;
  for (const auto& [name, description] : presets) {
    names.push_back(name);
    const FrameworkSpec f = load_framework(name);
    EXPECT_FALSE(f.description.empty()) << name;
    EXPECT_FALSE(f.version.empty()) << name;
    EXPECT_FALSE(f.sources.empty()) << name;
    EXPECT_EQ(framework_problem(f), "") << name;  // every schedule is one hetplan simulates
  }
  for (const char* want : {"deepspeed", "megatron-core", "megatron-lm-2021", "reference"})
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  EXPECT_EQ(std::string(kDefaultFramework), "megatron-core");
  const FrameworkSpec mc = load_framework("megatron-core");
  EXPECT_EQ(mc.export_format, "megatron");
  EXPECT_EQ(mc.can_run.schedules, (std::vector<std::string>{"1f1b", "interleaved"}));
  EXPECT_EQ(mc.can_run.zero_with_pipeline, (std::vector<int>{0, 1}));
  EXPECT_TRUE(mc.can_run.p2p_overlap);
  EXPECT_FALSE(load_framework("deepspeed").can_run.p2p_overlap);
}

TEST(Framework, AValueWithoutASourceIsRefusedNamingIt) {
  const std::string path = write_framework(
      "no_source", fixture_with("  memory: \"test fixture\"\n", "  memory.states: \"x\"\n"));
  const std::string e = error_of([&] { load_framework(path); });
  EXPECT_TRUE(contains(e, "sources")) << e;
  EXPECT_TRUE(contains(e, "memory.cast_copy_bytes")) << e;
  std::filesystem::remove(path);
}

TEST(Framework, BadFilesNameTheKeyAndWhatWasExpected) {
  struct Case {
    std::string from, to, expected;
  };
  for (const Case& c : std::vector<Case>{
           {"  host_mode: eager\n", "  host_mode: graphs\n", "defaults.host_mode"},
           {"  grad_accumulation_fusion: [false, true]\n", "  grad_accumulation_fusion: [false]\n",
            "expected a value listed in can_run.grad_accumulation_fusion"},
           {"  fragmentation: 0\n", "  fragmentation: 2\n", "memory.fragmentation"},
           {"  \"3\": [master, optimizer, gradients, weights]\n", "  \"4\": [master]\n",
            "expected a ZeRO stage: 1, 2 or 3"},
           {"export: none\n", "export: nemo\n", "export"},
           {"  sequence_parallel: true\n", "  sequence_parallel: true\n  pipelines: 4\n",
            "pipelines"},
           // CUDA-graph limits and modes a file lists without the mode that uses them.
           {"  host_modes: [eager]\n",
            "  host_modes: [eager]\n  cuda_graphs: {pipeline: false, expert_parallel: false}\n",
            "expected host_modes to list cuda-graphs"},
           {"  tp_comm_overlap: false\n  p2p",
            "  tp_comm_overlap: false\n"
            "  tp_comm_overlap_modes: [eager]\n  p2p",
            "expected no modes: tp_comm_overlap is false"},
           {"sources:\n", "graphed_parts: [blocks]\nsources:\n  graphed_parts: \"x\"\n",
            "graphed_parts"},
       }) {
    const std::string path = write_framework("bad", fixture_with(c.from, c.to));
    const std::string e = error_of([&] { load_framework(path); });
    EXPECT_TRUE(contains(e, c.expected)) << c.to << ": " << e;
    EXPECT_TRUE(contains(e, "bad.yaml")) << e;
    std::filesystem::remove(path);
  }
  const std::string e = error_of([] { load_framework("megatron-cor"); });
  EXPECT_TRUE(contains(e, "unknown framework \"megatron-cor\"")) << e;
  EXPECT_TRUE(contains(e, "megatron-core")) << e;
  // A schedule hetplan does not simulate is refused where the framework is used.
  const std::string path = write_framework(
      "odd_schedule", fixture_with("  schedules: [gpipe,", "  schedules: [dualpipe, gpipe,"));
  FrameworkSpec odd = load_framework(path);
  EXPECT_TRUE(contains(framework_problem(odd), "found \"dualpipe\"")) << framework_problem(odd);
  std::filesystem::remove(path);
}

// ZeRO's figures (Rajbhandari et al. 2020, section 5.1 and figure 1): 2 + 2 + K = 16 bytes per
// parameter for fp16 with Adam (K = 12), 2 + 2 + 12/Nd with P_os, 2 + (2 + 12)/Nd with P_os+g and
// 16/Nd with P_os+g+p; Megatron-LM keeps fp32 main gradients: 2 + 4 + 12 = 18 bytes, and the
// distributed optimizer 6 + 12/Nd.
TEST(DeviceMemory, TheZeroPapersFiguresAndMegatronsEighteenBytes) {
  const FrameworkSpec ds = load_framework("deepspeed"), mc = load_framework("megatron-core");
  const double psi = 7.5e9, nd = 64;  // the paper's 7.5B model on 64 GPUs
  auto states = [&](const FrameworkSpec& f, int zero, Dtype dtype) {
    MemoryInput in;
    in.param_count = psi;
    in.dp = static_cast<int64_t>(nd);
    in.zero = zero;
    in.dtype = dtype;
    in.reserve_bytes = 0;
    in.layout = &f.memory;
    const MemoryBreakdown m = device_memory(in);
    return m.weights + m.gradients + m.optimizer;
  };
  EXPECT_DOUBLE_EQ(states(ds, 0, Dtype::kFp16), 16 * psi);  // 120 GB: the paper's baseline
  EXPECT_DOUBLE_EQ(states(ds, 1, Dtype::kFp16), (4 + 12 / nd) * psi);  // 31.4 GB
  EXPECT_DOUBLE_EQ(states(ds, 2, Dtype::kFp16), (2 + 14 / nd) * psi);  // 16.6 GB
  EXPECT_DOUBLE_EQ(states(ds, 3, Dtype::kFp16), 16 / nd * psi);        // 1.9 GB
  EXPECT_DOUBLE_EQ(states(mc, 0, Dtype::kBf16), 18 * psi);
  EXPECT_DOUBLE_EQ(states(mc, 1, Dtype::kBf16), (6 + 12 / nd) * psi);
  EXPECT_DOUBLE_EQ(states(mc, 0, Dtype::kFp16), 18 * psi);
  // fp8 trains with bf16's states; fp32 keeps 4 + 4 + 8.
  EXPECT_DOUBLE_EQ(states(mc, 0, Dtype::kFp8), 18 * psi);
  EXPECT_DOUBLE_EQ(states(mc, 0, Dtype::kFp32), 16 * psi);
  // Megatron-LM's layout, the default without a framework, is the 18 bytes too.
  MemoryInput plain;
  plain.param_count = psi;
  plain.reserve_bytes = 0;
  EXPECT_DOUBLE_EQ(device_memory(plain).total(), 18 * psi);
}

TEST(DeviceMemory, AllocatedReservedAndDevice) {
  MemoryLayout layout = megatron_memory_layout();
  layout.fragmentation = 0.05;
  MemoryInput in;
  in.param_count = 1e9;
  in.activation_bytes = 2e9;
  in.transient_bytes = 1e9;
  in.reserve_bytes = 1.5e9;
  in.layout = &layout;
  const MemoryBreakdown m = device_memory(in);
  EXPECT_DOUBLE_EQ(m.allocated(), 18e9 + 2e9 + 1e9);
  EXPECT_DOUBLE_EQ(m.fragmentation, 0.05 * 21e9);
  EXPECT_DOUBLE_EQ(m.reserved(), 21e9 * 1.05);
  EXPECT_DOUBLE_EQ(m.total(), 21e9 * 1.05 + 1.5e9);
}

// Megatron-Core's gradient buffer is of the reduce dtype (param_and_grad_buffer.py at d98e8a64dd:
// fp32 with grad_reduce_in_fp32, else the parameters' bf16): reducing in bf16 saves 2 B of every
// parameter the device holds, before the allocator's share. DeepSpeed's bf16 optimizer keeps fp32
// gradients whatever it reduces in.
TEST(DeviceMemory, MegatronsGradientBufferIsOfTheReduceDtype) {
  const ModelSpec model = load_model("gpt2-medium");
  const ClusterSpec cluster = load_cluster("dgx-h100:1");
  const CostModel cost(load_profile_inputs({default_calibration_dir().string()}), cluster);
  Strategy s;
  s.dp = 8;
  s.zero = 1;
  s.global_batch = 8;
  s.given = kGivenFp32GradReduce;
  const auto peak = [&](const std::string& framework, bool fp32) {
    Strategy t = s;
    t.fp32_grad_reduce = fp32;
    if (framework == "deepspeed") {  // it adds the weight gradients in kernels of their own
      t.grad_accumulation_fusion = false;
      t.given |= kGivenGradAccumulationFusion;
    }
    const Prediction p = Evaluator(model, cluster, cost, load_framework(framework)).predict(t);
    EXPECT_TRUE(p.feasible) << p.reason;
    return p.peak_memory_bytes.at(0);
  };
  const FrameworkSpec mc = load_framework("megatron-core");
  const double held = static_cast<double>(model.parameters());  // one stage: the tied table once
  EXPECT_NEAR(peak("megatron-core", true) - peak("megatron-core", false),
              2 * held * (1 + mc.memory.fragmentation), 0.01 * held);
  EXPECT_DOUBLE_EQ(peak("deepspeed", true), peak("deepspeed", false));
}

Strategy file_strategy(uint32_t given) {
  Strategy s;
  s.dp = 2;
  s.tp = 2;
  s.sequence_parallel = true;
  s.given = given;
  return s;
}

TEST(FrameworkDefaults, FillWhatTheStrategyLeftOut) {
  const FrameworkSpec ds = load_framework("deepspeed");
  // Nothing given: DeepSpeed's own defaults (unfused attention, no fusion, reduction after the
  // backward in the training dtype).
  Strategy s = with_framework_defaults(file_strategy(0), ds);
  EXPECT_FALSE(s.flash_attention);
  EXPECT_FALSE(s.grad_accumulation_fusion);
  EXPECT_FALSE(s.overlap_grad_reduce);
  EXPECT_FALSE(s.fp32_grad_reduce);
  EXPECT_EQ(s.host_mode, HostMode::kEager);
  EXPECT_EQ(s.framework, "deepspeed");
  // What the file set stays.
  Strategy given = file_strategy(kGivenFlashAttention | kGivenFp32GradReduce);
  given.flash_attention = true;
  given.fp32_grad_reduce = true;
  s = with_framework_defaults(given, ds);
  EXPECT_TRUE(s.flash_attention);
  EXPECT_TRUE(s.fp32_grad_reduce);
  EXPECT_FALSE(s.overlap_grad_reduce);
  // A framework file is named by its path.
  EXPECT_EQ(framework_reference(testing::fixture_framework()),
            std::string(HETPLAN_TEST_DATA) + "/framework_fixture.yaml");
}

// A fp32 or tf32 model's attention is unfused whatever the framework's default (fused kernels take
// fp16 and bf16), and a strategy that asks for fused attention there breaks the attention rule.
TEST(FrameworkDefaults, AFp32ModelsAttentionIsUnfused) {
  const FrameworkSpec mc = load_framework("megatron-core");
  ModelSpec model = load_model(std::string(HETPLAN_SOURCE_DIR) + "/examples/models/opt-350m.yaml");
  ASSERT_EQ(model.dtype, Dtype::kTf32);
  EXPECT_TRUE(with_framework_defaults(file_strategy(0), mc).flash_attention);
  EXPECT_FALSE(with_framework_defaults(file_strategy(0), mc, &model).flash_attention);
  model.dtype = Dtype::kBf16;
  EXPECT_TRUE(with_framework_defaults(file_strategy(0), mc, &model).flash_attention);
  model.dtype = Dtype::kFp32;
  Strategy fused = file_strategy(kGivenFlashAttention);
  fused.global_batch = 8;
  fused.flash_attention = true;
  fused = with_framework_defaults(fused, mc, &model);
  EXPECT_TRUE(fused.flash_attention);  // what the file sets stays, and is refused
  const auto v = first_broken_rule({model, mc, 8}, fused);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->key, "flash_attention");
  EXPECT_EQ(v->reason,
            "opt-350m's activations are fp32: megatron-core's fused attention takes fp16 or "
            "bf16, so its attention runs unfused (flash_attention false)");
  fused.flash_attention = false;
  EXPECT_FALSE(first_broken_rule({model, mc, 8}, fused).has_value());
  // PyTorch's SDPA takes fp32 in its memory-efficient kernel: torchtitan keeps it fused.
  const FrameworkSpec tt = load_framework("torchtitan");
  EXPECT_TRUE(tt.can_run.fused_attention_takes(Dtype::kTf32));
  EXPECT_TRUE(with_framework_defaults(file_strategy(0), tt, &model).flash_attention);
}

TEST(StrategyRules, EachFrameworkRuleSaysWhatTheFrameworkRuns) {
  const ModelSpec model = load_model("gpt2-medium");
  const FrameworkSpec mc = load_framework("megatron-core"), ref = load_framework("reference");
  const FrameworkSpec ds = load_framework("deepspeed");
  auto broken = [&](const FrameworkSpec& f, const Strategy& s) {
    const auto v = first_broken_rule({model, f, 64}, s);
    return v ? v->code + " " + v->key + ": " + v->reason : std::string("none");
  };
  Strategy s;
  s.pp = 4;
  s.global_batch = 8;
  s.schedule = "v-zb";
  s.chunks = 2;
  EXPECT_EQ(broken(mc, s),
            "schedule schedule: megatron-core runs the pipeline schedules 1f1b, "
            "interleaved, not v-zb");
  EXPECT_EQ(broken(testing::fixture_framework(), s), "none");
  s.schedule = "1f1b";
  s.chunks = 1;
  s.zero = 2;
  EXPECT_EQ(broken(mc, s),
            "zero zero: megatron-core runs ZeRO stages 0, 1 with pipeline parallelism, not ZeRO-2");
  s.zero = 0;
  s.recompute = Recompute::kSelective;
  EXPECT_EQ(broken(load_framework("megatron-lm-2021"), s),
            "recompute recompute: megatron-lm-2021 runs recomputation none, full, not selective");
  s.recompute = Recompute::kNone;
  s.grad_accumulation_fusion = true;
  EXPECT_EQ(broken(ref, s),
            "grad_accumulation_fusion grad_accumulation_fusion: reference does "
            "not accumulate weight-gradient GEMMs into the main gradients");
  s.grad_accumulation_fusion = false;
  s.dp = 2;
  s.overlap_grad_reduce = true;
  EXPECT_EQ(broken(ref, s),
            "overlap_grad_reduce overlap_grad_reduce: reference reduces gradients after the "
            "backward");
  s.overlap_grad_reduce = false;
  s.tp = 2;
  s.sequence_parallel = true;
  EXPECT_EQ(broken(ref, s),
            "sequence_parallel sequence_parallel: reference has no sequence "
            "parallelism");
  s.sequence_parallel = false;
  s.tp_comm_overlap = true;
  EXPECT_EQ(broken(mc, s),
            "tp_comm_overlap tp_comm_overlap: tensor-parallel communication "
            "overlap needs sequence parallelism and tp > 1");
  s.tp_comm_overlap = false;
  s.host_mode = HostMode::kCompiled;
  EXPECT_EQ(broken(ds, s), "host_mode host_mode: deepspeed runs eager, not compiled");
  s.host_mode = HostMode::kEager;
  EXPECT_EQ(broken(ds, s), "none");
  // The structural rules come first, with the codes the search counts.
  s.global_batch = 7;
  EXPECT_EQ(broken(ds, s),
            "batch global_batch: global batch 7 is not a multiple of dp x micro_batch = 2 x 1");
}

// DeepSpeed's synchronous p2p (deepspeed/runtime/pipe/p2p.py): each transfer holds both stages, so
// a stage's forward and backward each take the transfer in and the transfer out, and nothing is
// left between passes.
TEST(FrameworkP2p, SynchronousSendsHoldBothStages) {
  const ModelSpec model = load_model("gpt2-medium");
  const ClusterSpec cluster = load_cluster("p3.8xlarge:2");
  const CostModel cost(load_profile_inputs({default_calibration_dir().string()}), cluster);
  const FrameworkSpec& async = testing::fixture_framework();
  FrameworkSpec sync = async;
  sync.can_run.p2p_overlap = false;
  Strategy s;
  s.dp = 2;
  s.pp = 4;
  s.micro_batch = 2;
  s.global_batch = 16;
  s.flash_attention = false;
  const Prediction a = Evaluator(model, cluster, cost, async).predict(s);
  const Prediction b = Evaluator(model, cluster, cost, sync).predict(s);
  ASSERT_TRUE(a.feasible && b.feasible) << a.reason << b.reason;
  ASSERT_EQ(a.stages.size(), 4u);
  for (size_t j = 0; j < 4; ++j) {
    const double in = j > 0 ? a.stages[j - 1].p2p_s : 0, out = a.stages[j].p2p_s;
    EXPECT_EQ(a.stages[j].stage.first_layer, b.stages[j].stage.first_layer);
    EXPECT_NEAR(b.stages[j].forward_s, a.stages[j].forward_s + in + out, 1e-15);
    EXPECT_NEAR(b.stages[j].backward_input_s, a.stages[j].backward_input_s + in + out, 1e-15);
  }
  EXPECT_GT(a.stages[1].p2p_s, 0);  // stages 1 and 2 are on different nodes: 10 Gbit/s
  EXPECT_GT(b.iteration_s, a.iteration_s);
}

// The search enumerates what the framework runs: megatron-core's space has no V schedule, and
// every strategy records the framework.
TEST(FrameworkSearch, TheSpaceIsWhatTheFrameworkRuns) {
  const ModelSpec model = load_model("gpt2-medium");
  const ClusterSpec cluster = load_cluster("p4d.24xlarge:2");
  const CostModel cost(load_profile_inputs({default_calibration_dir().string()}), cluster);
  const Evaluator ev(model, cluster, cost, load_framework("megatron-core"));
  SearchOptions o;
  o.global_batch = 64;
  o.top_k = 20;
  const SearchResult r = search_training(ev, o);
  ASSERT_FALSE(r.top.empty());
  for (const auto& t : r.top) {
    EXPECT_TRUE(t.strategy.schedule == "1f1b" || t.strategy.schedule == "interleaved")
        << t.strategy.schedule;
    EXPECT_EQ(t.strategy.framework, "megatron-core");
    EXPECT_TRUE(t.strategy.overlap_grad_reduce);  // Megatron-Bridge's default
  }
  // Asking for what it cannot run is bad input, not an empty search.
  o.schedules = {"v-zb"};
  EXPECT_TRUE(contains(error_of([&] { search_training(ev, o); }),
                       "megatron-core runs the pipeline schedules 1f1b, interleaved, not v-zb"));
  o.schedules.clear();
  o.host_mode = HostMode::kCompiled;
  const std::string host_error = error_of([&] { search_training(ev, o); });
  EXPECT_TRUE(contains(host_error, "host_mode: megatron-core runs ")) << host_error;
  EXPECT_TRUE(contains(host_error, ", not compiled")) << host_error;
}

// torchtitan's Interleaved1F1B is PyTorch's ScheduleInterleaved1F1B: it refuses a micro-batch count
// its rounds, max(1, m / pp), do not divide; Megatron-Core runs it (padding its groups of pp).
// Its 1F1B, Schedule1F1B, refuses fewer micro-batches than stages.
TEST(FrameworkRules, TorchtitanRefusesMicroBatchesItsRoundsDoNotDivide) {
  const ModelSpec model = load_model("gpt2-medium");
  const ClusterSpec cluster = load_cluster("p4d.24xlarge:1");
  const CostModel cost(load_profile_inputs({default_calibration_dir().string()}), cluster);
  Strategy s;
  s.dp = 2;
  s.pp = 4;
  s.micro_batch = 1;
  s.global_batch = 18;  // 9 micro-batches per replica: 2 rounds of 4.5
  s.schedule = "interleaved";
  s.chunks = 2;
  s.zero = 3;
  const Evaluator titan(model, cluster, cost, load_framework("torchtitan"));
  Strategy t = s;
  t.overlap_grad_reduce = true;
  t.grad_accumulation_fusion = false;
  const Prediction refused = titan.predict(t);
  EXPECT_FALSE(refused.feasible);
  EXPECT_EQ(refused.reason_code(), "schedule") << refused.reason;
  EXPECT_TRUE(contains(refused.reason, "9 micro-batches in max(1, 9 / pp 4) = 2 rounds"))
      << refused.reason;
  t.global_batch = 20;  // 10: 2 rounds of 5
  const Prediction ran = titan.predict(t);
  EXPECT_TRUE(ran.feasible) << ran.reason;
  // Its 1F1B is Schedule1F1B, which needs a micro-batch per stage at least: 3 over pp 4 is refused.
  t.schedule = "1f1b";
  t.chunks = 1;
  t.global_batch = 6;
  const Prediction few = titan.predict(t);
  EXPECT_FALSE(few.feasible);
  EXPECT_TRUE(contains(few.reason, "refuses 3 micro-batches over pp 4")) << few.reason;
  s.zero = 1;
  s.global_batch = 18;
  const Prediction megatron =
      Evaluator(model, cluster, cost, load_framework("megatron-core")).predict(s);
  EXPECT_TRUE(megatron.feasible) << megatron.reason;
}

// An op family the framework runs as eager kernels costs its launches and bytes: the
// megatron-core file fuses bias, dropout and add into one forward kernel (3 activations and a
// one-byte mask per element) where the fixture runs a dropout kernel and an add.
TEST(FrameworkOps, BiasDropoutAddFusionIsOneKernelOfItsBytes) {
  const ModelSpec model = load_model("gpt2-medium");  // dropout 0.1
  const FrameworkSpec mc = load_framework("megatron-core");
  LayerShape shape;
  shape.micro_batch = 2;
  const LayerWork plain = layer_work(model.layers[1], shape);
  shape.framework = &mc;
  const LayerWork fused = layer_work(model.layers[1], shape);
  auto forward = [](const LayerWork& w, const std::string& kernel) {
    double bytes = 0;
    int64_t launches = 0;
    for (const auto& m : w.memory_ops)
      if (m.kernel == kernel && m.pass == Pass::kForward) {
        bytes += m.bytes;
        launches += m.launches;
      }
    return std::make_pair(bytes, launches);
  };
  const double elements = 2.0 * 1024 * 1024;  // tokens x hidden of the residual branch
  EXPECT_EQ(forward(plain, "dropout_fwd"), std::make_pair(2 * elements * (2 * 2 + 1), int64_t{2}));
  EXPECT_EQ(forward(plain, "residual_add"), std::make_pair(2 * elements * 3 * 2, int64_t{2}));
  EXPECT_EQ(forward(fused, "eager_bias_dropout_add_fwd"),
            std::make_pair(2 * elements * (3 * 2 + 1), int64_t{2}));
  EXPECT_EQ(forward(fused, "dropout_fwd").second, 0);
  EXPECT_EQ(layer_kernels(fused, Recompute::kNone).pass[0] + 2,
            layer_kernels(plain, Recompute::kNone).pass[0]);
}

// Megatron-Core as Megatron-Bridge runs it: Transformer Engine's fused cross-entropy, two kernels
// each way (transformer_engine/pytorch/triton/cross_entropy.py at d0067d0da): forward reads the
// bf16 logits twice and writes their fp32 gradient; backward scales it in place and casts it.
TEST(FrameworkOps, MegatronCoresLossIsTransformerEnginesFusedKernel) {
  const ModelSpec model = load_model("gpt2-medium");
  const FrameworkSpec mc = load_framework("megatron-core");
  LayerShape shape;
  const LayerWork plain = layer_work(model.layers.back(), shape);
  shape.framework = &mc;
  const LayerWork fused = layer_work(model.layers.back(), shape);
  const auto op = [](const LayerWork& w, const std::string& kernel) {
    for (const auto& m : w.memory_ops)
      if (m.kernel == kernel) return std::make_pair(m.bytes, m.launches);
    return std::make_pair(0.0, int64_t{0});
  };
  const double logits = 1024.0 * 50304;  // tokens x the padded vocabulary
  EXPECT_EQ(op(fused, "eager_cross_entropy_fwd"), std::make_pair(logits * (2 * 2 + 4), int64_t{2}));
  EXPECT_EQ(op(fused, "eager_cross_entropy_bwd"), std::make_pair(logits * (2 + 3 * 4), int64_t{2}));
  EXPECT_EQ(op(fused, "ce_exp").second, 0);
  EXPECT_EQ(op(plain, "ce_exp"), std::make_pair(logits * 8, int64_t{1}));
}

// fp32 scores take Megatron's torch softmax path (FusedScaleMaskSoftmax fuses for half precision
// only): the layer-scaling multiply, the mask and the softmax under Megatron-DeepSpeed, the mask
// and the softmax under Megatron-Core; bf16 scores keep the one fused kernel.
TEST(FrameworkOps, Fp32ScoresTakeMegatronsUnfusedSoftmax) {
  const ModelSpec model = load_model("gpt2-medium");  // 16 heads, sequence 1024
  LayerShape shape;
  shape.flash_attention = false;
  auto softmax = [&](const char* framework, Dtype dtype, Pass pass) {
    const FrameworkSpec f = load_framework(framework);
    shape.framework = &f;
    shape.dtype = dtype;
    const LayerWork w = layer_work(model.layers[1], shape);
    for (const auto& m : w.memory_ops)
      if (m.pass == pass && m.kernel.find("softmax") != std::string::npos)
        return std::make_pair(m.bytes, m.launches);
    return std::make_pair(0.0, int64_t{0});
  };
  const double scores = 16.0 * 1024 * 1024;
  EXPECT_EQ(softmax("deepspeed", Dtype::kFp32, Pass::kForward),
            std::make_pair(scores * 6 * 4, int64_t{3}));
  EXPECT_EQ(softmax("deepspeed", Dtype::kFp32, Pass::kBackwardInput),
            std::make_pair(scores * 7 * 4, int64_t{3}));
  EXPECT_EQ(softmax("megatron-core", Dtype::kTf32, Pass::kForward),
            std::make_pair(scores * 4 * 4, int64_t{2}));
  EXPECT_EQ(softmax("deepspeed", Dtype::kBf16, Pass::kForward),
            std::make_pair(scores * 2 * 2, int64_t{1}));
}

// torch.compile covers what the framework compiles: torchtitan at 9dec370 compiled its blocks
// alone, so its loss keeps the eager cross-entropy (the fp32 upcast a transient the size of the
// fp32 logits); at its head the loss is compiled too (compiled_parts: blocks, loss).
TEST(FrameworkOps, TorchCompileCoversTheFrameworksCompiledParts) {
  const ModelSpec model = load_model("llama3-8b");
  const FrameworkSpec dec2024 = load_framework("torchtitan-2024");
  const FrameworkSpec head = load_framework("torchtitan");
  EXPECT_EQ(dec2024.compiled_parts, std::vector<std::string>({"blocks"}));
  EXPECT_EQ(dec2024.mode_for("loss", HostMode::kCompiled), HostMode::kEager);
  EXPECT_EQ(dec2024.mode_for("blocks", HostMode::kCompiled), HostMode::kCompiled);
  EXPECT_EQ(head.mode_for("loss", HostMode::kCompiled), HostMode::kCompiled);
  EXPECT_EQ(head.mode_for("head", HostMode::kCompiled), HostMode::kEager);
  EXPECT_EQ(load_framework("megatron-core").mode_for("loss", HostMode::kCompiled),
            HostMode::kCompiled);  // no compiled_parts: everything
  LayerShape shape;
  shape.micro_batch = 1;
  shape.host_mode = HostMode::kCompiled;
  const LayerSpec& lm_head = model.layers.back();
  shape.framework = &dec2024;
  const LayerWork eager_loss = layer_work(lm_head, shape);
  shape.framework = &head;
  const LayerWork compiled_loss = layer_work(lm_head, shape);
  const double logits = static_cast<double>(lm_head.seq_len) * lm_head.head()->vocab;
  // torchtitan's eager recipe: one fp32 value a logit held beside the kept softmax.
  EXPECT_DOUBLE_EQ(eager_loss.transient_bytes - compiled_loss.transient_bytes, 4 * logits);
  // The blocks are compiled under both: the same work.
  shape.framework = &dec2024;
  const LayerWork a = layer_work(model.layers[1], shape);
  shape.framework = &head;
  const LayerWork b = layer_work(model.layers[1], shape);
  EXPECT_EQ(layer_kernels(a, Recompute::kNone).total(), layer_kernels(b, Recompute::kNone).total());
}

// The host issues each part's kernels at the cost of the mode it runs in: under torchtitan at its
// head (compiled_parts: blocks, loss) the head's norm and output projection are eager and its loss
// compiled; at 9dec370 (blocks) the whole head is eager; megatron-core compiles everything.
TEST(FrameworkHost, EachPartsKernelsCostTheHostOfItsMode) {
  const ModelSpec model = load_model("llama3-8b");
  const FrameworkSpec dec2024 = load_framework("torchtitan-2024");
  const FrameworkSpec head = load_framework("torchtitan");
  const FrameworkSpec megatron = load_framework("megatron-core");
  const HostCosts host{HostMode::kCompiled, 1e-6, 10e-6};
  LayerShape shape;
  shape.micro_batch = 1;
  shape.host_mode = HostMode::kCompiled;
  const LayerSpec& lm_head = model.layers.back();
  const LayerSpec& block = model.layers[1];
  for (const FrameworkSpec* f : {&dec2024, &head, &megatron}) {
    shape.framework = f;
    const LayerWork w = layer_work(lm_head, shape);
    const double kernels = layer_kernels(w, Recompute::kNone).total();
    const double loss = w.loss_launches;
    EXPECT_GT(loss, 0) << f->name;
    EXPECT_LT(loss, kernels) << f->name;  // the norm and the projection's GEMMs beside it
    const double expected = f == &dec2024 ? kernels * 10e-6
                            : f == &head  ? (kernels - loss) * 10e-6 + loss * 1e-6
                                          : kernels * 1e-6;
    EXPECT_NEAR(eval::layer_host_s(lm_head, w, kernels, *f, host), expected, 1e-15) << f->name;
    const LayerWork b = layer_work(block, shape);
    const double block_kernels = layer_kernels(b, Recompute::kNone).total();
    EXPECT_NEAR(eval::layer_host_s(block, b, block_kernels, *f, host), block_kernels * 1e-6,
                1e-15)
        << f->name;  // the blocks are compiled under all three
  }
  // In eager mode every part is eager.
  shape.host_mode = HostMode::kEager;
  shape.framework = &head;
  const LayerWork w = layer_work(lm_head, shape);
  const double kernels = layer_kernels(w, Recompute::kNone).total();
  EXPECT_NEAR(eval::layer_host_s(lm_head, w, kernels, head, {HostMode::kEager, 10e-6, 10e-6}),
              kernels * 10e-6, 1e-15);
}

// torchtitan at its head captures each micro-batch's forward and backward in a CUDA graph unless
// told not to, and refuses to with a pipeline or with expert parallelism (trainer.py
// _validate_cuda_graphs): its default host mode is cuda-graphs where it can be, eager where not;
// the optimizer step stays eager. torchtitan of December 2024 had no graphs.
TEST(FrameworkHost, TorchtitanCapturesItsStepInCudaGraphsWhereItCan) {
  const FrameworkSpec head = load_framework("torchtitan");
  const FrameworkSpec dec2024 = load_framework("torchtitan-2024");
  const ModelSpec model = load_model("qwen3-30b-a3b");
  EXPECT_EQ(head.defaults.host_mode, HostMode::kCudaGraphs);
  EXPECT_EQ(head.mode_for("blocks", HostMode::kCudaGraphs), HostMode::kCudaGraphs);
  EXPECT_EQ(head.mode_for("loss", HostMode::kCudaGraphs), HostMode::kCudaGraphs);
  EXPECT_EQ(head.mode_for("optimizer", HostMode::kCudaGraphs), HostMode::kEager);
  EXPECT_EQ(head.host_s_per_kernel.at(HostMode::kCudaGraphs), 0.0);
  EXPECT_EQ(dec2024.defaults.host_mode, HostMode::kEager);
  EXPECT_TRUE(dec2024.graphed_parts.empty());
  EXPECT_EQ(std::count(dec2024.can_run.host_modes.begin(), dec2024.can_run.host_modes.end(),
                       HostMode::kCudaGraphs),
            0);
  Strategy s;
  s.dp = 8;
  s.global_batch = 8;
  s.zero = 3;  // FSDP2, the sharding torchtitan runs
  EXPECT_EQ(with_framework_defaults(s, head).host_mode, HostMode::kCudaGraphs);
  EXPECT_EQ(with_framework_defaults(s, dec2024).host_mode, HostMode::kEager);
  Strategy piped = s;
  piped.dp = 4, piped.pp = 2;
  EXPECT_EQ(with_framework_defaults(piped, head).host_mode, HostMode::kEager);
  Strategy experts = s;
  experts.ep = 8;
  EXPECT_EQ(with_framework_defaults(experts, head).host_mode, HostMode::kEager);
  // Asked for, graphs with a pipeline break the host_mode rule.
  piped.host_mode = HostMode::kCudaGraphs;
  piped.given |= kGivenHostMode;
  piped = with_framework_defaults(piped, head);
  const auto v = first_broken_rule({model, head, 8}, piped);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->key, "host_mode");
  EXPECT_EQ(v->reason,
            "torchtitan captures no pipeline in CUDA graphs: host_mode eager or compiled");
  // Async tensor parallelism is a torch.compile pass there.
  Strategy async = s;
  async.dp = 4, async.tp = 2;
  async.sequence_parallel = true;
  async.tp_comm_overlap = true;
  async.given |= kGivenTpCommOverlap;
  async = with_framework_defaults(async, head);
  const auto t = first_broken_rule({model, head, 8}, async);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->key, "tp_comm_overlap");
  async.host_mode = HostMode::kCompiled;
  EXPECT_FALSE(first_broken_rule({model, head, 8}, async).has_value());
}

// A release's file removes what its base has and it has not with a null.
TEST(FrameworkFiles, ANullInAReleaseRemovesTheBasesKey) {
  const FrameworkSpec dec2024 = load_framework("torchtitan-2024");
  EXPECT_EQ(dec2024.sources.count("graphed_parts"), 0u);
  EXPECT_EQ(dec2024.host_s_per_kernel.count(HostMode::kCudaGraphs), 0u);
  EXPECT_TRUE(dec2024.can_run.cuda_graphs_pipeline);  // no limits: no graphs at all
}

// zero_grad(set_to_none=True) frees the gradients after each step: the next step's first forward
// holds its activations without them, and they exist beside what is held from the first gradient
// pass on (the larger of the two is the peak).
TEST(DeviceMemory, GradientsFreedAfterTheStepAreNotBesideTheFirstForwardsActivations) {
  const FrameworkSpec pt = load_framework("pytorch");
  MemoryInput in;
  in.param_count = 1e9;
  in.layout = &pt.memory;
  in.activation_bytes = 5e9;
  in.activation_bytes_with_gradients = 0;  // one micro-batch on one device
  MemoryBreakdown m = device_memory(in);
  EXPECT_DOUBLE_EQ(m.gradients, 0);
  EXPECT_DOUBLE_EQ(m.allocated(), 4e9 + 8e9 + 5e9);  // fp32 weights, two moments, activations
  in.activation_bytes_with_gradients = 4.9e9;  // a second micro-batch after the first backward
  m = device_memory(in);
  EXPECT_DOUBLE_EQ(m.gradients, 4e9);
  EXPECT_DOUBLE_EQ(m.activations, 4.9e9);
  EXPECT_DOUBLE_EQ(m.allocated(), 4e9 + 4e9 + 8e9 + 4.9e9);
  in.activation_bytes_with_gradients = -1;  // gradients through the step
  EXPECT_DOUBLE_EQ(device_memory(in).allocated(), 4e9 + 4e9 + 8e9 + 5e9);
  // Under DDP (dp > 1, nothing sharded) its fp32 buckets stay beside them, freed or not.
  in.dp = 2;
  in.activation_bytes_with_gradients = 0;
  m = device_memory(in);
  EXPECT_DOUBLE_EQ(m.gradients, 4e9);
  EXPECT_DOUBLE_EQ(m.allocated(), 4e9 + 4e9 + 8e9 + 5e9);
  in.activation_bytes_with_gradients = -1;
  EXPECT_DOUBLE_EQ(device_memory(in).gradients, 8e9);
}

// Plain PyTorch on one GPU: one micro-batch a step has no gradients beside its activations, two
// have (the second forward runs after the first backward); Megatron-Core's gradient buffer is
// there either way.
TEST(DeviceMemory, APlainPytorchStepOfOneMicroBatchPeaksWithoutItsGradients) {
  const ModelSpec model = load_model("gpt2-medium");
  const ClusterSpec cluster = load_cluster("dgx-h100:1");
  const CostModel cost(load_profile_inputs({default_calibration_dir().string()}), cluster);
  const auto peak = [&](const std::string& framework, int64_t global_batch) {
    Strategy s;
    s.micro_batch = 1;
    s.global_batch = global_batch;
    const FrameworkSpec f = load_framework(framework);
    const Prediction p = Evaluator(model, cluster, cost, f).predict(with_framework_defaults(s, f));
    EXPECT_TRUE(p.feasible) << p.reason;
    return p.stages.at(0).memory;
  };
  const MemoryBreakdown one = peak("pytorch", 1), two = peak("pytorch", 2);
  EXPECT_EQ(one.gradients, 0);
  EXPECT_NEAR(two.gradients, 4.0 * static_cast<double>(model.parameters()), 1e3);
  EXPECT_DOUBLE_EQ(one.activations, two.activations);
  EXPECT_GT(peak("megatron-core", 1).gradients, 0);
}

// `hetplan frameworks NAME` says the default host mode, what the graphs capture and refuse, and
// where the step frees its gradients; the JSON holds the same.
TEST(FrameworksCli, ShowsTheHostModeDefaultsAndFreedGradients) {
  const auto shown = testing::run_hetplan("frameworks torchtitan");
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  EXPECT_TRUE(testing::contains(shown.output,
                                "default host mode: cuda-graphs; CUDA graphs capture: embedding, "
                                "blocks, head, loss, not with a pipeline, not with expert "
                                "parallelism"))
      << shown.output;
  EXPECT_TRUE(testing::contains(shown.output,
                                "gradients freed after each step under: eager, "
                                "compiled"))
      << shown.output;
  const auto old = testing::run_hetplan("frameworks torchtitan-2024 --json");
  ASSERT_EQ(old.exit_code, 0) << old.output;
  EXPECT_TRUE(testing::contains(old.output, "\"default_host_mode\": \"eager\"")) << old.output;
}

// A Grace-Hopper superchip's host issues each kernel 2.46 times as slowly as a DGX H100's Xeon
// (the GPU preset's host_cost_factor): the same eager step's host time scales by it; under CUDA
// graphs only the optimizer step's kernels are left to it (Megatron-Core's full-iteration graph).
TEST(FrameworkHost, AGraceHostIssuesKernelsMoreSlowly) {
  const ModelSpec model = load_model("gpt2-medium");
  const auto host = [&](const std::string& cluster_name, HostMode mode) {
    const ClusterSpec cluster = load_cluster(cluster_name);
    const CostModel cost(load_profile_inputs({default_calibration_dir().string()}), cluster);
    const FrameworkSpec f = load_framework("megatron-core");
    Strategy s;
    s.dp = 4;
    s.micro_batch = 1;
    s.global_batch = 8;
    s.host_mode = mode;
    s.given |= kGivenHostMode;
    const Prediction p = Evaluator(model, cluster, cost, f).predict(with_framework_defaults(s, f));
    EXPECT_TRUE(p.feasible) << p.reason;
    return p.host_s;
  };
  EXPECT_EQ(load_gpu("gh200-96gb").host_cost_factor, 2.46);
  EXPECT_EQ(load_gpu("h100-sxm").host_cost_factor, 1.0);
  // The datasheet GH200 has no measured host cost: the framework's figure, scaled. The H100's
  // profile has none either (the framework's 28 us).
  const double x86 = host("p5.48xlarge:1", HostMode::kEager);
  ASSERT_GT(x86, 0);
  EXPECT_NEAR(host("gh200-superchip-4:1", HostMode::kEager) / x86, 2.46, 1e-6);
  const double graphed = host("gh200-superchip-4:1", HostMode::kCudaGraphs);
  EXPECT_NEAR(graphed / host("p5.48xlarge:1", HostMode::kCudaGraphs), 2.46, 1e-6);
  EXPECT_LT(graphed, 0.01 * host("gh200-superchip-4:1", HostMode::kEager));
}

}  // namespace
}  // namespace hetplan
