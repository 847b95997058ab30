#include "search/search.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <system_error>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "costmodel/errors.h"
#include "search/eval/steps.h"
#include "search/partition.h"
#include "search/pipeline/schedule.h"
#include "search/placement.h"
#include "search/rules.h"

namespace hetplan {
namespace {

// Runs `work` on the calling thread and on up to `threads` - 1 more. The work takes its items from
// one shared counter, so a thread the system refuses to start (a low process limit) only makes it
// slower: the threads started do its share. An exception in any thread is rethrown here once all
// have joined, where a joinable thread left behind would end the process in std::terminate.
template <class Work>
void run_on_threads(int threads, const Work& work) {
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto guarded = [&] {
    try {
      work();
    } catch (...) {
      std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(guarded);
    } catch (const std::system_error&) {
      break;
    }
  }
  guarded();
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

constexpr size_t kBatch = 64;    // candidates costed between two updates of the pruning bound
constexpr size_t kNearKept = 5;  // infeasible candidates reported when nothing fits

struct Placement {
  int64_t dp = 1, tp = 1, pp = 1;
  std::vector<StageSpec> stages;     // devices and GPU types; layers left to the partition
  std::vector<int64_t> stage_group;  // node group of each stage
  double max_memory_bytes = 0;       // the largest device memory among the stages
};

struct Candidate {
  Strategy strategy;
  size_t placement = 0;
  double lower_bound_s = 0;
  int64_t id = 0;  // enumeration order: the deterministic tie-break
  // The candidates that differ only in their recomputation share `twin` (the id of the first of
  // them); `recompute` is the index of this one's among the search's choices.
  int64_t twin = 0;
  size_t recompute = 0;
};

struct Outcome {
  bool evaluated = false;
  std::string pruned;   // reason when not evaluated
  bool fits = true;     // false: no layer partition fits in memory (result left empty)
  double overflow = 0;  // then: average bytes needed over capacity (a cheap closeness measure)
  RankedStrategy result;
};

std::vector<int64_t> divisors(int64_t n, int64_t cap) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d <= n && d <= cap; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

// The module sets of Megatron-Core's --recompute-modules that Megatron-Bridge's performance
// recipes run (src/megatron/bridge/perf_recipes at 067f987df0), most memory saved first. The search
// tries the first one the framework runs and the model has, besides selective alone (core_attn):
// each set more would add a recomputation choice to every candidate (DeepSeek-V3 on 2,048 H100s:
// 358,176 candidates before, 835,744 with four sets), and the sets after the first save less
// memory for little less recomputation (memory-bound kernels and the small up-projections).
const std::vector<std::vector<RecomputeModule>>& recipe_module_sets() {
  using M = RecomputeModule;
  static const std::vector<std::vector<M>> kSets = {
      {M::kMlaUpProj, M::kLayernorm, M::kMoeAct},  // deepseek/b200 nvfp4, deepseek/common.py
      {M::kLayernorm, M::kMoeAct},                 // gpt_oss/h100, b200; deepseek/h100 64 GPUs
      {M::kMlaUpProj},                             // deepseek/b200/deepseek_v3.py bf16, fp8cs
  };
  return kSets;
}

// The first of those sets that `framework` runs and `model` has, as a selective recomputation
// (none where no set fits).
std::vector<Recomputation> module_recomputations(const FrameworkSpec& framework,
                                                 const ModelSpec& model) {
  const OpGroup has = recompute_modules_of(model);
  const auto& runs = framework.can_run.recompute_modules;
  for (const auto& set : recipe_module_sets()) {
    OpGroup modules = OpGroup::kDefault;
    bool fits = true;
    for (RecomputeModule m : set) {
      fits = fits && has_module(has, m) &&
             std::find(runs.begin(), runs.end(), to_string(m)) != runs.end();
      modules = modules | module_group(m);
    }
    if (fits) return {Recomputation(Recompute::kSelective, modules)};
  }
  return {};
}

// Ranks feasible results: faster first, then the earlier candidate.
bool better(const RankedStrategy& a, int64_t ida, const RankedStrategy& b, int64_t idb) {
  if (a.predicted.iteration_s != b.predicted.iteration_s)
    return a.predicted.iteration_s < b.predicted.iteration_s;
  return ida < idb;
}

class TrainingSearch {
 public:
  TrainingSearch(const Evaluator& ev, const SearchOptions& o) : ev_(ev), o_(o) {
    const FrameworkSpec& f = ev.framework();
    schedules_ = o.schedules.empty() ? f.can_run.schedules : o.schedules;
    for (Recompute rc : o.recompute)
      if (std::find(f.can_run.recompute.begin(), f.can_run.recompute.end(),
                    std::string(to_string(rc))) != f.can_run.recompute.end()) {
        recompute_.emplace_back(rc);
        half_stage_.push_back(false);
        if (rc == Recompute::kSelective)
          for (const Recomputation& r : module_recomputations(f, ev.model())) {
            recompute_.push_back(r);
            half_stage_.push_back(false);
          }
        // Full recomputation of half of each stage's blocks too (Megatron-Core's block method):
        // between none and full in time and in memory.
        if (rc == Recompute::kFull && f.can_run.recompute_block) {
          recompute_.emplace_back(rc);
          half_stage_.push_back(true);
        }
      }
    // With one stage every schedule is plain gradient accumulation over the micro-batches, except
    // that GPipe keeps all of their activations; 1F1B (one in flight) stands for them all.
    single_stage_schedule_ = schedules_.front();
    for (const auto& name : schedules_)
      if (name == "1f1b") single_stage_schedule_ = name;
  }

  SearchResult run() {
    result_.stats.time_limit_s = o_.time_limit_s;
    generate();
    cost_all();
    result_.stats.elapsed_s = elapsed_s();
    result_.stats.candidates_per_s =
        static_cast<double>(result_.stats.candidates) / std::max(1e-9, result_.stats.elapsed_s);
    for (auto& [id, r] : top_) result_.top.push_back(std::move(r));
    for (auto& [key, r] : near_) result_.closest_infeasible.push_back(std::move(r));
    return std::move(result_);
  }

 private:
  void prune(const std::string& reason, int64_t n = 1) { result_.stats.pruned[reason] += n; }

  double now_s() const {
    if (o_.clock_s) return o_.clock_s();
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  double elapsed_s() const { return now_s() - start_s_; }
  // True once the time limit is spent (and from then on).
  bool out_of_time() {
    if (!result_.stats.time_limit_reached && o_.time_limit_s > 0 && elapsed_s() >= o_.time_limit_s)
      result_.stats.time_limit_reached = true;
    return result_.stats.time_limit_reached;
  }

  static constexpr int64_t kMaxIdleGroups = 8;

  // Every point of the space, with the cheap predicates applied in order.
  void generate() {
    const ClusterSpec& cluster = ev_.cluster();
    const int64_t G = static_cast<int64_t>(cluster.groups.size());
    // Which node groups a plan uses: all of them, or with --allow-idle-nodes every non-empty
    // subset (the full set first, so that ties keep the plan that uses everything).
    if (o_.allow_idle_nodes && G > kMaxIdleGroups)
      throw InputError(
          fmt::format("--allow-idle-nodes: the cluster has {} node groups; subsets "
                      "are searched for at most {}",
                      G, kMaxIdleGroups));
    const int64_t all = (int64_t{1} << G) - 1;
    int64_t id = 0;
    for (int64_t used = all; used > 0; --used) {
      if (used != all && !o_.allow_idle_nodes) break;
      std::vector<int64_t> groups;
      for (int64_t g = 0; g < G; ++g)
        if (used >> g & 1) groups.push_back(g);
      generate(groups, id);
    }
  }

  // The points of the space that run on `groups` (indices into the cluster's groups).
  void generate(const std::vector<int64_t>& groups, int64_t& id) {
    const ClusterSpec& cluster = ev_.cluster();
    int64_t N = 0;
    for (int64_t g : groups) N += cluster.groups[g].count * cluster.groups[g].node.gpus;
    const int64_t B = o_.global_batch;
    int64_t max_node = 0;
    for (int64_t g : groups) max_node = std::max(max_node, cluster.groups[g].node.gpus);
    std::vector<int64_t> tps = o_.tensor_widths;
    if (tps.empty())
      for (int64_t t = 1; t <= std::min(2 * max_node, N); t *= 2) tps.push_back(t);
    const std::vector<int64_t> cps = context_widths(N);
    const std::vector<int64_t> mbs = o_.micro_batches.empty() ? divisors(B, 64) : o_.micro_batches;
    const auto orders = node_group_orders(cluster, groups);
    // The (tp, cp, pp) shapes, counted for the progress.
    int64_t shapes_total = 0, shapes_done = 0;
    for (int64_t tp : tps)
      for (int64_t cp : cps)
        if (N % (tp * cp) == 0)
          shapes_total += static_cast<int64_t>(divisors(N / (tp * cp), N).size());
    for (int64_t tp : tps)
      for (int64_t cp : cps) {
        if (N % (tp * cp) == 0)
          generate_shapes(N, tp, cp, mbs, orders, shapes_done, shapes_total, id);
        if (out_of_time()) return;
      }
  }

  // The context widths tried: the options', else powers of two that keep kMinContextChunkTokens
  // per rank and split the sequence into 2 x cp chunks, where the framework runs CP.
  std::vector<int64_t> context_widths(int64_t N) const {
    if (!o_.context_widths.empty()) return o_.context_widths;
    std::vector<int64_t> cps = {1};
    if (ev_.framework().can_run.context_parallel.empty()) return cps;
    int64_t seq = 0;
    for (const auto& l : ev_.model().layers) seq = std::max(seq, l.seq_len);
    for (int64_t cp = 2; cp <= N && seq / cp >= kMinContextChunkTokens && seq % (2 * cp) == 0;
         cp *= 2)
      cps.push_back(cp);
    return cps;
  }

  // How the candidates' context parallelism moves keys and values: the ring (p2p, Megatron-Core's
  // default) where the framework runs it, else the framework's first way.
  CpComm context_comm() const {
    const auto& ways = ev_.framework().can_run.context_parallel;
    CpComm c = CpComm::kP2p;
    if (!ways.empty() && std::find(ways.begin(), ways.end(), "p2p") == ways.end())
      parse_cp_comm(ways.front(), c);
    return c;
  }

  // The expert widths tried: the options', else for an MoE model powers of two dividing its
  // routed experts up to kMaxSearchedExpertWidth, where the framework runs expert parallelism.
  std::vector<int64_t> expert_widths() const {
    if (!o_.expert_widths.empty()) return o_.expert_widths;
    std::vector<int64_t> eps = {1};
    if (!ev_.model().is_moe() || !ev_.framework().can_run.expert_parallel) return eps;
    int64_t experts = 0;
    for (const auto& l : ev_.model().layers)
      if (const auto* b = l.block(); b && b->is_moe()) experts = b->experts;
    for (int64_t ep = 2; ep <= std::min(experts, kMaxSearchedExpertWidth) && experts % ep == 0;
         ep *= 2)
      eps.push_back(ep);
    return eps;
  }

  // The token dispatchers tried at expert width ep: with experts over ranks, the framework's
  // all-to-all ones (alltoall, and flex where it runs it: a token once per node and GPU); at ep 1
  // the strategy's default (nothing crosses ranks to choose between).
  std::vector<MoeDispatcher> dispatchers(int64_t ep) const {
    const MoeDispatcher fallback = Strategy{}.moe_dispatcher;
    if (ep == 1 || !ev_.model().is_moe()) return {fallback};
    std::vector<MoeDispatcher> out;
    for (const auto& name : ev_.framework().can_run.moe_dispatchers)
      if (MoeDispatcher d; parse_moe_dispatcher(name, d) && d != MoeDispatcher::kAllGather)
        out.push_back(d);
    if (out.empty()) out.push_back(fallback);
    return out;
  }

  // The expert tensor widths tried at tensor width tp (0 stands for tp itself).
  std::vector<int64_t> expert_tensor_widths(int64_t tp) const {
    std::vector<int64_t> out = {0};
    if (!ev_.model().is_moe()) return out;
    if (!o_.expert_tensor_widths.empty()) {
      for (int64_t etp : o_.expert_tensor_widths)
        if (etp != 0 && etp != tp) out.push_back(etp);
      return out;
    }
    if (tp > 1 && ev_.framework().can_run.expert_tensor_parallel) out.push_back(1);
    return out;
  }

  // The placements and candidates of one (tp, cp) on N GPUs (node kinds in `orders`), every pp.
  void generate_shapes(int64_t N, int64_t tp, int64_t cp, const std::vector<int64_t>& mbs,
                       const std::vector<std::vector<int64_t>>& orders, int64_t& shapes_done,
                       int64_t shapes_total, int64_t& id) {
    const ClusterSpec& cluster = ev_.cluster();
    const ModelSpec& model = ev_.model();
    const int64_t L = static_cast<int64_t>(model.layers.size());
    const std::string tp_problem = tensor_parallel_problem(model, tp);
    const std::vector<int64_t> eps = expert_widths();
    const std::vector<int64_t> etps = expert_tensor_widths(tp);
    const std::vector<Precision> precisions =
        o_.precisions.empty() ? std::vector<Precision>{Precision::kBf16} : o_.precisions;
    for (int64_t pp : divisors(N / (tp * cp), N)) {
      if (out_of_time()) return;
      if (o_.progress) o_.progress(shapes_done++, shapes_total, 0, true);
      const int64_t dp = N / (tp * cp * pp);
      // Placements of this shape, one per distinct order of node kinds.
      std::vector<size_t> shapes;
      for (const auto& order : orders) {
        auto stages = place_stages(cluster, order, dp * cp, tp, pp);
        if (!stages) continue;
        bool duplicate = false;
        for (size_t k : shapes) {
          bool same = placements_[k].stages.size() == stages->size();
          for (size_t s = 0; same && s < stages->size(); ++s)
            same = placements_[k].stages[s].devices == (*stages)[s].devices;
          duplicate |= same;
        }
        if (duplicate) continue;
        shapes.push_back(add_placement(dp, tp, pp, std::move(*stages)));
      }
      const bool sp_runs = o_.sequence_parallel && ev_.framework().can_run.sequence_parallel;
      const std::vector<bool> sp_choices =
          tp > 1 && sp_runs ? std::vector<bool>{false, true} : std::vector<bool>{false};
      int64_t expert_choices = 0;  // (ep, dispatcher) pairs
      for (int64_t ep : eps) expert_choices += static_cast<int64_t>(dispatchers(ep).size());
      const std::vector<ScheduleChoice> schedules = schedule_choices(pp);
      const int64_t per_shape = static_cast<int64_t>(mbs.size() * recompute_.size()) *
                                (o_.max_zero + 1) * static_cast<int64_t>(sp_choices.size()) *
                                static_cast<int64_t>(schedules.size()) * expert_choices *
                                static_cast<int64_t>(etps.size() * precisions.size());
      result_.stats.candidates +=
          per_shape * static_cast<int64_t>(std::max<size_t>(1, shapes.size()));
      if (!tp_problem.empty()) {
        prune("tp", per_shape * static_cast<int64_t>(std::max<size_t>(1, shapes.size())));
        continue;
      }
      if (pp > L) {
        prune("pp", per_shape * static_cast<int64_t>(std::max<size_t>(1, shapes.size())));
        continue;
      }
      if (shapes.empty()) {
        prune("placement", per_shape);
        continue;
      }
      Strategy base;
      base.dp = dp;
      base.tp = tp;
      base.cp = cp;
      base.cp_comm = context_comm();
      base.pp = pp;
      for (size_t shape : shapes)
        for (int64_t ep : eps)
          for (MoeDispatcher dispatcher : dispatchers(ep))
            for (int64_t etp : etps)
              for (Precision precision : precisions) {
                base.ep = ep;
                base.moe_dispatcher = dispatcher;
                base.etp = etp;
                base.precision = precision;
                add_candidates(base, shape, mbs, sp_choices, schedules, id);
              }
    }
  }

  struct ScheduleChoice {
    std::string schedule;
    int64_t chunks;
  };
  // The schedules tried at pp stages, each with its chunks per device: its own count, and for a
  // schedule that runs any (interleaved) also every count up to kMaxSearchedChunks that splits the
  // blocks evenly over pp x chunks, with or without the embedding and the loss counted as a layer
  // each (Megatron-Core's even --num-layers-per-virtual-pipeline-stage split and its
  // --account-for-embedding/loss-in-pipeline-split).
  std::vector<ScheduleChoice> schedule_choices(int64_t pp) const {
    const int64_t blocks = ev_.model().num_blocks();
    const int64_t layers = static_cast<int64_t>(ev_.model().layers.size());
    std::vector<ScheduleChoice> out;
    for (const auto& name : schedules_) {
      const pipeline::ScheduleInfo& info = pipeline::schedule_info(name);
      out.push_back({name, info.default_chunks});
      if (!info.any_chunks || pp == 1) continue;
      for (int64_t v = info.default_chunks + 1; v <= kMaxSearchedChunks && pp * v <= layers; ++v)
        if (blocks % (pp * v) == 0 || (blocks + 2) % (pp * v) == 0) out.push_back({name, v});
    }
    return out;
  }

  // Every micro-batch, recomputation, ZeRO stage, sequence-parallel choice and schedule of one
  // placed shape (`base` holds its widths and precision).
  void add_candidates(const Strategy& base, size_t shape, const std::vector<int64_t>& mbs,
                      const std::vector<bool>& sp_choices,
                      const std::vector<ScheduleChoice>& schedules, int64_t& id) {
    const int64_t B = o_.global_batch, pp = base.pp;
    // Candidates a recomputation choice apart are this many ids apart (the loops below).
    const int64_t stride = static_cast<int64_t>(o_.max_zero + 1) *
                           static_cast<int64_t>(sp_choices.size() * schedules.size());
    for (int64_t mb : mbs)
      for (size_t r = 0; r < recompute_.size(); ++r)
        for (int zero = 0; zero <= o_.max_zero; ++zero)
          for (bool sp : sp_choices)
            for (const auto& [sched, chunks] : schedules) {
              Candidate c;
              c.id = id++;
              c.twin = c.id - static_cast<int64_t>(r) * stride;
              c.recompute = r;
              c.placement = shape;
              Strategy& s = c.strategy;
              s = base;
              s.micro_batch = mb;
              s.global_batch = B;
              const Recomputation& rc = recompute_[r];
              s.recompute = rc.granularity;
              s.recompute_modules =
                  rc == Recomputation(rc.granularity) ? OpGroup::kDefault : rc.modules;
              s.zero = zero;
              s.sequence_parallel = sp;
              s.schedule = sched;
              s.chunks = chunks;
              const int64_t stage_blocks =
                  ev_.model().num_blocks() / std::max<int64_t>(1, pp * s.chunks_per_device());
              if (half_stage_[r]) s.recompute_num_layers = std::max<int64_t>(1, stage_blocks / 2);
              s = with_switches(std::move(s));
              if (auto broken = ev_.broken_rule(s)) {
                prune(broken->code);
              } else if ((pp == 1 && sched != single_stage_schedule_) ||
                         (rc == Recomputation(Recompute::kSelective) && s.flash_attention) ||
                         (half_stage_[r] && stage_blocks < 2) ||
                         (zero > 0 && s.grad_replicas() == 1)) {
                prune("equivalent");  // same plan as another candidate
              } else if (!o_.exhaustive && memory_bound_fails(s, placements_[shape])) {
                prune("memory_bound");
              } else {
                candidates_.push_back(std::move(c));
              }
            }
  }

  size_t add_placement(int64_t dp, int64_t tp, int64_t pp, std::vector<StageSpec> stages) {
    Placement p;
    p.dp = dp;
    p.tp = tp;
    p.pp = pp;
    const auto& devices = ev_.devices();
    for (const auto& st : stages) {
      const Device& d = devices[st.devices.front()];
      p.stage_group.push_back(d.group);
      p.max_memory_bytes =
          std::max(p.max_memory_bytes, ev_.cluster().groups[d.group].node.gpu.memory_bytes);
    }
    p.stages = std::move(stages);
    placements_.push_back(std::move(p));
    return placements_.size() - 1;
  }

  // Weights, gradients and optimizer state alone exceed the largest device on average.
  bool memory_bound_fails(const Strategy& s, const Placement& p) {
    double params = 0, experts = 0;
    for (const auto& layer : ev_.model().layers) {
      params += layer_parameters(layer, s.tp, false, s.ep, s.expert_tp());
      experts += expert_parameters(layer, s.ep, s.expert_tp());
    }
    // The evaluator's own states (without a recipe's weight copies: a lower bound).
    eval::HeldParameters held;
    held.params = params / static_cast<double>(s.pp);
    held.expert_params = experts / static_cast<double>(s.pp);
    if (s.lora.enabled()) {  // the model's weights frozen (the adapters' states are left out)
      held.frozen_params = held.params;
      held.expert_frozen_params = held.expert_params;
    }
    const MemoryInput states = eval::parameter_states(ev_, s, ev_.model().dtype, held);
    const double per_stage = device_memory(states).allocated();
    if (per_stage <= p.max_memory_bytes) return false;
    if (result_.min_static_bytes == 0 || per_stage < result_.min_static_bytes) {
      result_.min_static_bytes = per_stage;
      result_.static_limit_bytes = p.max_memory_bytes;
    }
    return true;
  }

  // No schedule runs faster than its busiest device. With W the model's work measured on the
  // fastest node kind of the placement, and rho_d the best ratio over layers of a rank's speed to
  // that kind's, the ranks' loads X_d (in fastest-kind seconds) sum to W and rank d needs at least
  // X_d / rho_d; so the busiest needs at least W / sum(rho_d), for each of m micro-batches.
  double lower_bound(const Candidate& c) const {
    const Placement& p = placements_[c.placement];
    std::vector<int64_t> kinds = p.stage_group;
    std::sort(kinds.begin(), kinds.end());
    kinds.erase(std::unique(kinds.begin(), kinds.end()), kinds.end());
    const size_t L = ev_.model().layers.size();
    std::vector<const std::vector<LayerCost>*> costs;
    for (int64_t g : kinds) {
      // A tensor-parallel group spans as few nodes of its kind as hold it.
      const int64_t per_node = ev_.cluster().groups[g].node.gpus;
      const int64_t tp_nodes = (c.strategy.tp + per_node - 1) / per_node;
      costs.push_back(&ev_.layer_costs(g, tp_nodes, c.strategy));
    }
    std::vector<double> fastest(L, std::numeric_limits<double>::infinity());
    for (const auto* k : costs)
      for (size_t i = 0; i < L; ++i) fastest[i] = std::min(fastest[i], (*k)[i].total_s());
    std::map<int64_t, double> rho;  // per node kind
    for (size_t g = 0; g < kinds.size(); ++g) {
      double best = 0;
      for (size_t i = 0; i < L; ++i) best = std::max(best, fastest[i] / (*costs[g])[i].total_s());
      rho[kinds[g]] = best;
    }
    double rho_sum = 0;
    for (int64_t g : p.stage_group) rho_sum += rho[g];
    const double work = std::accumulate(fastest.begin(), fastest.end(), 0.0);
    return static_cast<double>(c.strategy.microbatches()) * work / rho_sum;
  }

  // Costs a candidate. With `force`, a candidate whose layers fit no partition is still predicted
  // (time-balanced partition) so that its memory can be reported.
  Outcome evaluate(const Candidate& c, bool force = false) const {
    Strategy s = c.strategy;
    s.stages = placements_[c.placement].stages;
    Outcome out;
    out.evaluated = true;
    PredictOptions po;
    po.skip_unfit = !force;
    po.placement_checked = true;  // place_stages built it
    out.result.predicted = ev_.predict(s, po);
    if (!force && out.result.predicted.kind == Infeasible::kNoPartition) {
      out.fits = false;
      out.overflow = out.result.predicted.overflow;
    }
    out.result.strategy = std::move(s);
    // The prediction knows the partition it chose: keep it with the strategy.
    if (out.fits && !out.result.predicted.stages.empty()) {
      out.result.strategy.stages.clear();
      for (const auto& st : out.result.predicted.stages)
        out.result.strategy.stages.push_back(st.stage);
    }
    return out;
  }

  void cost_all() {
    // Cheap lower bounds first (they fill the layer-cost cache), then the most promising first.
    // Out of time among them, the candidates without a bound are not costed.
    for (size_t i = 0; i < candidates_.size(); ++i) {
      if (i % kBatch == 0 && out_of_time()) {
        prune("time_limit", static_cast<int64_t>(candidates_.size() - i));
        candidates_.resize(i);
        break;
      }
      candidates_[i].lower_bound_s = lower_bound(candidates_[i]);
    }
    std::sort(candidates_.begin(), candidates_.end(), [](const Candidate& a, const Candidate& b) {
      return a.lower_bound_s != b.lower_bound_s ? a.lower_bound_s < b.lower_bound_s : a.id < b.id;
    });
    // Per-op recomputation after the rest, each part in bound order, so that its twins' outcomes
    // are known when it comes (twin_decides).
    const auto deferred = std::stable_partition(candidates_.begin(), candidates_.end(),
                                                [&](const Candidate& c) { return !is_op(c); });
    const size_t split = static_cast<size_t>(deferred - candidates_.begin());
    if (cost_part(0, split)) cost_part(split, candidates_.size());

    // Every candidate dealt with: costed, or pruned by the bound or the time limit.
    if (o_.progress)
      o_.progress(static_cast<int64_t>(candidates_.size()),
                  static_cast<int64_t>(candidates_.size()),
                  top_.empty() ? 0 : top_.front().second.predicted.iteration_s, false);
    // The candidates that came closest to fitting, predicted in full for the report.
    std::sort(unfit_.begin(), unfit_.end());
    for (size_t k = 0; k < unfit_.size() && near_.size() < kNearKept; ++k) {
      Outcome out = evaluate(candidates_[unfit_[k].second], /*force=*/true);
      keep_near(candidates_[unfit_[k].second], std::move(out.result));
    }
  }

  bool is_op(const Candidate& c) const {
    return recompute_[c.recompute].granularity == Recompute::kOp;
  }

  // Costs candidates [first, last) in batches of kBatch in their order, while their bounds can
  // beat the top. Returns false when out of time (nothing more is costed).
  bool cost_part(size_t first, size_t last) {
    const int threads = std::max(1, o_.threads);
    std::vector<Outcome> outcomes;
    for (size_t begin = first; begin < last; begin += kBatch) {
      const size_t end = std::min(last, begin + kBatch);
      const double bound = threshold();  // from earlier batches only: deterministic
      if (!o_.exhaustive && candidates_[begin].lower_bound_s > bound) {
        prune("time_bound", static_cast<int64_t>(last - begin));
        return true;
      }
      // Costed in batches, so the limit is overrun by one batch at most.
      if (out_of_time()) {
        prune("time_limit", static_cast<int64_t>(candidates_.size() - begin));
        return false;
      }
      outcomes.assign(end - begin, Outcome{});
      std::atomic<size_t> next{begin};
      auto work = [&]() {
        for (size_t i = next++; i < end; i = next++) {
          Outcome& out = outcomes[i - begin];
          if (!o_.exhaustive && candidates_[i].lower_bound_s > bound) {
            out.pruned = "time_bound";
          } else if (const char* why = twin_decides(candidates_[i])) {
            out.pruned = why;
          } else {
            out = evaluate(candidates_[i]);
          }
        }
      };
      run_on_threads(threads, work);
      for (size_t i = begin; i < end; ++i) absorb(candidates_[i], std::move(outcomes[i - begin]));
      if (o_.progress)
        o_.progress(static_cast<int64_t>(end), static_cast<int64_t>(candidates_.size()),
                    top_.empty() ? 0 : top_.front().second.predicted.iteration_s, false);
    }
    return true;
  }

  // What a per-op recomputation candidate's twins already settle: with no recomputation fitting
  // it can only be slower (each layer's time no less, the same partitions open to it), and where
  // full recomputation fits no partition neither does it (each layer keeps no less: the block's
  // input and more, and its backward's transient is less by no more than that one layer's
  // difference). nullptr: to be costed.
  const char* twin_decides(const Candidate& c) const {
    if (o_.exhaustive || !is_op(c)) return nullptr;
    const auto it = twin_state_.find(c.twin);
    if (it == twin_state_.end()) return nullptr;
    if (it->second & kNoneFits) return "recompute_twin";
    if (it->second & kFullUnfit) return "memory_twin";
    return nullptr;
  }

  // Notes what a plain none or full candidate's outcome says of its per-op twin.
  void note_twin(const Candidate& c, const Outcome& out) {
    const Recomputation& r = recompute_[c.recompute];
    if (!out.evaluated || half_stage_[c.recompute] || r != Recomputation(r.granularity)) return;
    if (r.granularity == Recompute::kNone && out.fits && out.result.predicted.feasible)
      twin_state_[c.twin] |= kNoneFits;
    if (r.granularity == Recompute::kFull && !out.fits) twin_state_[c.twin] |= kFullUnfit;
  }

  double threshold() const {
    if (static_cast<int64_t>(top_.size()) < o_.top_k)
      return std::numeric_limits<double>::infinity();
    return top_.back().second.predicted.iteration_s;
  }

  void absorb(const Candidate& c, Outcome&& out) {
    note_twin(c, out);
    if (!out.evaluated) {
      prune(out.pruned);
      return;
    }
    ++result_.stats.evaluated;
    if (!out.fits) {
      ++result_.stats.infeasible["memory"];
      unfit_.emplace_back(out.overflow, index_of(c));
      if (unfit_.size() > 4 * kNearKept) {  // keep the closest few
        std::nth_element(unfit_.begin(), unfit_.begin() + kNearKept, unfit_.end());
        unfit_.resize(kNearKept);
      }
      return;
    }
    const Prediction& p = out.result.predicted;
    if (!p.feasible) {
      ++result_.stats.infeasible[p.reason_code()];
      keep_near(c, std::move(out.result));
      return;
    }
    ++result_.stats.feasible;
    auto pos = std::lower_bound(
        top_.begin(), top_.end(), std::make_pair(c.id, out.result),
        [](const auto& a, const auto& b) { return better(a.second, a.first, b.second, b.first); });
    top_.insert(pos, {c.id, std::move(out.result)});
    if (static_cast<int64_t>(top_.size()) > o_.top_k) top_.pop_back();
  }

  // Keeps the infeasible candidates closest to fitting (peak memory over capacity, then time).
  void keep_near(const Candidate& c, RankedStrategy&& r) {
    if (r.predicted.iteration_s <= 0) return;
    // Peaks are per pipeline rank; stages per virtual stage, and the first pp of them sit on
    // ranks 0..pp-1 in every schedule (interleaved and V alike).
    double over = 0;
    const size_t ranks = std::min(r.predicted.peak_memory_bytes.size(), r.predicted.stages.size());
    for (size_t d = 0; d < ranks; ++d) {
      const auto& devices = ev_.devices();
      const auto& gpu =
          ev_.cluster().groups[devices[r.predicted.stages[d].stage.devices.front()].group].node.gpu;
      over = std::max(over, r.predicted.peak_memory_bytes[d] / gpu.memory_bytes);
    }
    near_.emplace_back(std::make_tuple(over, r.predicted.iteration_s, c.id), std::move(r));
    std::sort(near_.begin(), near_.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    if (near_.size() > kNearKept) near_.pop_back();
  }

  size_t index_of(const Candidate& c) const { return static_cast<size_t>(&c - candidates_.data()); }

  // A candidate's switches: the options' where given, the framework's defaults for the rest (the
  // one place those defaults are applied: with_framework_defaults, as predict and export do).
  Strategy with_switches(Strategy s) const {
    const auto given = [&s](const auto& option, auto& field, uint32_t bit) {
      if (!option) return;
      field = *option;
      s.given |= bit;
    };
    given(o_.flash_attention, s.flash_attention, kGivenFlashAttention);
    given(o_.grad_accumulation_fusion, s.grad_accumulation_fusion, kGivenGradAccumulationFusion);
    given(o_.overlap_grad_reduce, s.overlap_grad_reduce, kGivenOverlapGradReduce);
    given(o_.tp_comm_overlap, s.tp_comm_overlap, kGivenTpCommOverlap);
    given(o_.fp32_grad_reduce, s.fp32_grad_reduce, kGivenFp32GradReduce);
    given(o_.host_mode, s.host_mode, kGivenHostMode);
    s.tp_comm_overlap = s.tp_comm_overlap && s.sequence_parallel;
    s.lora = o_.lora;
    s = with_framework_defaults(std::move(s), ev_.framework(), &ev_.model());
    s.given = 0;  // a searched strategy sets every switch
    return s;
  }

  const Evaluator& ev_;
  const SearchOptions& o_;
  std::vector<std::string> schedules_;
  std::vector<Recomputation> recompute_;  // the options' that the framework runs, with modules
  // What the plain none and full twins of each enumeration slot (Candidate::twin) came to.
  static constexpr uint8_t kNoneFits = 1, kFullUnfit = 2;
  std::map<int64_t, uint8_t> twin_state_;
  // Per entry of recompute_: full recomputation of half of each stage's blocks.
  std::vector<bool> half_stage_;
  std::string single_stage_schedule_;  // the one schedule tried with pp 1
  std::vector<Placement> placements_;
  std::vector<Candidate> candidates_;
  std::vector<std::pair<int64_t, RankedStrategy>> top_;  // (candidate id, result), best first
  std::vector<std::pair<std::tuple<double, double, int64_t>, RankedStrategy>> near_;
  std::vector<std::pair<double, size_t>> unfit_;  // (memory overflow, candidate index)
  SearchResult result_;
  const double start_s_ = now_s();
};

// Options that ask for what the framework cannot run are bad input, not an empty search: each is
// put to the framework's rule (search/rules.h) on a strategy that holds it, in the rule's words.
void check_framework_runs(const Evaluator& ev, const SearchOptions& o) {
  const RuleContext context{ev.model(), ev.framework()};
  const auto check = [&](std::string_view key, std::string_view code, const Strategy& probe) {
    if (std::string why = rule_problem(code, context, probe); !why.empty())
      throw InputError(fmt::format("{}: {}", key, why));
  };
  Strategy probe;  // widths at which every switch's rule applies
  probe.dp = probe.tp = probe.pp = 2;
  probe.sequence_parallel = true;
  for (const auto& name : o.schedules) {
    probe.schedule = name;
    check("schedules", "schedule", probe);
  }
  probe.schedule = "1f1b";
  const auto with = [&probe](auto field, auto value) {
    Strategy s = probe;
    s.*field = value;
    return s;
  };
  if (o.overlap_grad_reduce)
    check("overlap_grad_reduce", "overlap_grad_reduce",
          with(&Strategy::overlap_grad_reduce, *o.overlap_grad_reduce));
  if (o.grad_accumulation_fusion)
    check("grad_accumulation_fusion", "grad_accumulation_fusion",
          with(&Strategy::grad_accumulation_fusion, *o.grad_accumulation_fusion));
  if (o.flash_attention)
    check("flash_attention", "attention", with(&Strategy::flash_attention, *o.flash_attention));
  for (Precision p : o.precisions) check("precision", "precision", with(&Strategy::precision, p));
  if (o.tp_comm_overlap)
    check("tp_comm_overlap", "tp_comm_overlap",
          with(&Strategy::tp_comm_overlap, *o.tp_comm_overlap));
  if (o.host_mode) check("host_mode", "host_mode", with(&Strategy::host_mode, *o.host_mode));
  if (o.lora.enabled()) {  // the framework and the model's layers (the rank's split is per tp)
    Strategy lora = probe;
    lora.tp = 1;
    lora.sequence_parallel = false;
    lora.lora = o.lora;
    check("lora", "lora", lora);
  }
}

}  // namespace

SearchResult search_training(const Evaluator& evaluator, const SearchOptions& options) {
  for (int64_t mb : options.micro_batches)
    if (mb <= 0 || mb > kMaxBatchSamples)
      throw InputError(
          fmt::format("micro-batches: expected sizes from 1 to {}, got {}", kMaxBatchSamples, mb));
  const auto check_widths = [](const char* what, const std::vector<int64_t>& widths, int64_t lo) {
    for (int64_t w : widths)
      if (w < lo || w > kMaxParallelDegree)
        throw InputError(fmt::format("{}: expected widths from {} to {}, got {}", what, lo,
                                     kMaxParallelDegree, w));
  };
  check_widths("tensor widths", options.tensor_widths, 1);
  check_widths("context widths", options.context_widths, 1);
  check_widths("expert widths", options.expert_widths, 1);
  check_widths("expert tensor widths", options.expert_tensor_widths, 0);
  if (options.global_batch <= 0 || options.global_batch > kMaxBatchSamples)
    throw InputError(fmt::format("global batch: expected 1 to {} samples, got {}", kMaxBatchSamples,
                                 options.global_batch));
  if (options.time_limit_s < 0)
    throw InputError(
        fmt::format("time limit: expected >= 0 seconds, got {}", options.time_limit_s));
  const ClusterSpec& cluster = evaluator.cluster();
  if (cluster.num_gpus() > kMaxSearchGpus)
    throw InputError(cluster.origin, "",
                     fmt::format("{} GPUs; the training search plans for at most {} (past that "
                                 "the time and memory it takes grow with the GPUs beyond what a "
                                 "search can finish: docs/search.md, \"Limits\")",
                                 cluster.num_gpus(), kMaxSearchGpus));
  check_framework_runs(evaluator, options);
  return TrainingSearch(evaluator, options).run();
}

Json to_json(const SearchStats& s) {
  Json pruned = Json::object(), infeasible = Json::object();
  int64_t pruned_total = 0, infeasible_total = 0;
  for (const auto& [k, v] : s.pruned) {
    pruned[k] = v;
    pruned_total += v;
  }
  for (const auto& [k, v] : s.infeasible) {
    infeasible[k] = v;
    infeasible_total += v;
  }
  return {{"candidates", s.candidates},
          {"evaluated", s.evaluated},
          {"feasible", s.feasible},
          {"pruned", pruned_total},
          {"pruned_by_reason", pruned},
          {"infeasible", infeasible_total},
          {"infeasible_by_reason", infeasible},
          {"elapsed_s", s.elapsed_s},
          {"candidates_per_s", s.candidates_per_s},
          {"time_limit_s", s.time_limit_s},
          {"time_limit_reached", s.time_limit_reached}};
}

}  // namespace hetplan
