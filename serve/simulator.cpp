#include "serve/simulator.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <queue>

namespace hetplan::serve {
namespace {

struct Hop {
  int machine = 0;
  int layers = 0;  // layers this request runs there (fewer than held with partial inference)
};

struct Request {
  double arrival = 0;
  int prompt = 0, output = 0;
  std::vector<Hop> path;
  int generated = 0;
  double admitted = -1, first_token = -1, finished = -1;
};

// One step of one request at one hop: its prompt pass or one decode token.
struct Item {
  int request = 0;
  int hop = 0;
  bool prompt = false;
};

struct MachineState {
  std::deque<Item> queue;
  std::vector<Item> running;
  bool busy = false;
  int layers = 0;
  int batch_limit = 1;
  double kv_capacity = 0;  // token-layers
  double kv_used = 0;
  const LayerTimeModel* times = nullptr;
};

enum class EventKind { kArrival, kDeliver, kBatchDone };

struct Event {
  double time;
  int64_t seq;  // ties in time keep insertion order: the run is deterministic
  EventKind kind;
  int target;  // request (arrival), machine or kSink (deliver), machine (batch done)
  Item item;
  bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
};

LatencyStats stats_of(std::vector<double> v) {
  LatencyStats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean_s = sum / v.size();
  s.p50_s = v[v.size() / 2];
  s.p95_s = v[std::min(v.size() - 1, static_cast<size_t>(std::ceil(0.95 * v.size())) - 1)];
  return s;
}

class Simulation {
 public:
  Simulation(const ServingProblem& problem, const Placement& placement, const RoutingTable& routing,
             const SimulationConfig& config)
      : problem_(problem), placement_(placement), routing_(routing), config_(config) {
    const int n = problem.machines();
    machines_.resize(n);
    nic_in_free_.assign(n + 2, 0.0);
    nic_out_free_.assign(n + 2, 0.0);
    for (int i = 0; i < n; ++i) {
      const LayerRange& r = placement.ranges[i];
      if (r.empty()) continue;
      const MachineCapacity& cap = problem.capacity[i];
      MachineState& m = machines_[i];
      m.layers = r.count;
      m.times = problem.times[i].get();
      const double limit =
          config.model_batch_limit ? cap.decode_batch[r.count] : m.times->max_decode_batch();
      m.batch_limit = std::max(1, static_cast<int>(std::floor(limit)));
      m.kv_capacity = cap.kv_tokens_per_layer[r.count] * r.count;
    }
    for (int i = 0; i <= n; ++i) {
      std::vector<int> weights;
      for (const auto& c : routing.out[i]) weights.push_back(c.weight);
      iwrr_.emplace_back(std::move(weights));
    }
  }

  SimulationResult run() {
    const std::vector<TraceRequest> generated =
        config_.trace.empty()
            ? poisson_trace(config_.requests, config_.rate_requests_per_s,
                            config_.mean_prompt_tokens, config_.mean_output_tokens,
                            config_.max_request_tokens, config_.seed)
            : std::vector<TraceRequest>{};
    const std::vector<TraceRequest>& trace = config_.trace.empty() ? generated : config_.trace;
    for (const TraceRequest& t : trace) {
      Request req;
      req.arrival = t.arrival_s;
      req.prompt = t.prompt_tokens;
      req.output = t.output_tokens;
      push(t.arrival_s, EventKind::kArrival, static_cast<int>(requests_.size()), {});
      requests_.push_back(req);
    }
    while (!events_.empty()) {
      const Event e = events_.top();
      events_.pop();
      now_ = e.time;
      switch (e.kind) {
        case EventKind::kArrival:
          waiting_.push_back(e.target);
          admit_waiting();
          break;
        case EventKind::kDeliver:
          deliver(e.target, e.item);
          break;
        case EventKind::kBatchDone:
          finish_batch(e.target);
          break;
      }
    }
    return summarize();
  }

 private:
  void push(double time, EventKind kind, int target, Item item) {
    events_.push({time, seq_++, kind, target, item});
  }

  // Picks a path hop by hop with the IWRR weights, skipping machines whose KV cache is full.
  bool choose_path(Request& req) {
    const double tokens = req.prompt + req.output;
    std::vector<Hop> path;
    int at = kSource, boundary = 0;
    const int L = problem_.num_layers();
    while (boundary < L) {
      const auto& choices = routing_.from(at);
      Iwrr& iwrr = iwrr_[at == kSource ? problem_.machines() : at];
      int picked = -1;
      for (int attempt = 0; attempt < iwrr.size() && picked < 0; ++attempt) {
        const int c = iwrr.next();
        const int j = choices[c].to;
        if (j == kSink) return false;  // only machines holding the last layer lead to the sink
        const int layers = placement_.ranges[j].end() - boundary;
        if (machines_[j].kv_used + tokens * layers <= machines_[j].kv_capacity) {
          picked = j;
          path.push_back({j, layers});
        }
      }
      if (picked < 0) return false;
      at = picked;
      boundary = placement_.ranges[picked].end();
    }
    req.path = std::move(path);
    return true;
  }

  void admit_waiting() {
    while (!waiting_.empty()) {
      Request& req = requests_[waiting_.front()];
      if (!choose_path(req)) {
        if (active_ == 0) {  // does not fit even an empty cluster
          ++rejected_;
          waiting_.pop_front();
          continue;
        }
        return;  // first come, first served: wait for KV cache to free up
      }
      const double tokens = req.prompt + req.output;
      for (const Hop& h : req.path) machines_[h.machine].kv_used += tokens * h.layers;
      req.admitted = now_;
      ++active_;
      const int id = waiting_.front();
      waiting_.pop_front();
      send(kSource, req.path.front().machine, req.prompt * problem_.model.token_bytes,
           {id, 0, true});
    }
  }

  // Sends `bytes` from -> to: through the sender's outbound NIC, the link and the receiver's
  // inbound NIC, each a FIFO at its bandwidth (store and forward), the link's latency between the
  // link and the receiving NIC. Unlimited NICs take no time.
  void send(int from, int to, double bytes, Item item) {
    double t = occupy(nic_out_free_[slot(from)], nic_out_GBps(from), now_, bytes);
    if (const auto link = problem_.cluster.link(from, to))
      t = occupy(link_free_[{from, to}], link->bandwidth_GBps, t, bytes) + link->latency_s;
    t = occupy(nic_in_free_[slot(to)], nic_in_GBps(to), t, bytes);
    push(t, EventKind::kDeliver, to, item);
  }

  // A FIFO resource of `GBps` (1e9 bytes/s) free from `free_at`: when `bytes` ready at `ready`
  // are through.
  static double occupy(double& free_at, double GBps, double ready, double bytes) {
    if (!(GBps > 0)) return ready;
    free_at = std::max(ready, free_at) + bytes / (GBps * 1e9);
    return free_at;
  }

  // NIC state slots: machines, then the clients' source and sink.
  int slot(int endpoint) const {
    if (endpoint == kSource) return problem_.machines();
    if (endpoint == kSink) return problem_.machines() + 1;
    return endpoint;
  }
  double nic_out_GBps(int endpoint) const {
    if (endpoint == kSource) return problem_.cluster.source_nic_GBps;
    return endpoint >= 0 ? problem_.cluster.machines()[endpoint].nic_out_GBps : 0;
  }
  double nic_in_GBps(int endpoint) const {
    if (endpoint == kSink) return problem_.cluster.sink_nic_GBps;
    return endpoint >= 0 ? problem_.cluster.machines()[endpoint].nic_in_GBps : 0;
  }

  void deliver(int target, const Item& item) {
    if (target == kSink) {
      step_done(item.request);
      return;
    }
    machines_[target].queue.push_back(item);
    start_batch(target);
  }

  void start_batch(int machine) {
    MachineState& m = machines_[machine];
    if (m.busy || m.queue.empty()) return;
    int decode = 0, prompt_tokens = 0;
    bool has_prompt = false;
    std::deque<Item> rest;
    for (const Item& item : m.queue) {
      if (item.prompt && !has_prompt) {  // one prompt per batch, as Helix runs T4 and L4 nodes
        has_prompt = true;
        prompt_tokens = requests_[item.request].prompt;
        m.running.push_back(item);
      } else if (!item.prompt && decode < m.batch_limit) {
        ++decode;
        m.running.push_back(item);
      } else {
        rest.push_back(item);
      }
    }
    m.queue = std::move(rest);
    m.busy = true;
    ++batches_;
    const double seconds = m.layers * ((has_prompt ? m.times->prompt_s(prompt_tokens) : 0.0) +
                                       (decode > 0 ? m.times->decode_s(decode) : 0.0));
    push(now_ + seconds, EventKind::kBatchDone, machine, {});
  }

  void finish_batch(int machine) {
    MachineState& m = machines_[machine];
    const std::vector<Item> done = std::move(m.running);
    m.running.clear();
    m.busy = false;
    for (const Item& item : done) {
      const Request& req = requests_[item.request];
      const bool last = item.hop + 1 == static_cast<int>(req.path.size());
      if (last) {
        send(machine, kSink, problem_.model.token_bytes, item);
      } else {
        const double tokens = item.prompt ? req.prompt : 1;
        send(machine, req.path[item.hop + 1].machine,
             tokens * problem_.model.activation_bytes_per_token,
             {item.request, item.hop + 1, item.prompt});
      }
    }
    start_batch(machine);
  }

  void step_done(int id) {
    Request& req = requests_[id];
    ++req.generated;
    if (req.first_token < 0) req.first_token = now_;
    if (req.generated > 1 && now_ <= config_.window_s) ++window_decode_tokens_;
    if (req.generated < req.output) {
      send(kSource, req.path.front().machine, problem_.model.token_bytes, {id, 0, false});
      return;
    }
    req.finished = now_;
    const double tokens = req.prompt + req.output;
    for (const Hop& h : req.path) machines_[h.machine].kv_used -= tokens * h.layers;
    --active_;
    admit_waiting();
  }

  SimulationResult summarize() const {
    SimulationResult s;
    s.requests = static_cast<int64_t>(requests_.size());
    s.rejected = rejected_;
    s.batches = batches_;
    std::vector<double> prompt, decode, wait;
    double first = -1, last = 0, tokens = 0, output = 0;
    for (const Request& r : requests_) {
      if (r.finished < 0) continue;
      ++s.completed;
      first = first < 0 ? r.arrival : std::min(first, r.arrival);
      last = std::max(last, r.finished);
      tokens += r.prompt + r.output;
      output += r.output;
      prompt.push_back(r.first_token - r.arrival);
      wait.push_back(r.admitted - r.arrival);
      if (r.output > 1) decode.push_back((r.finished - r.first_token) / (r.output - 1));
    }
    if (s.completed > 0 && last > first) {
      s.duration_s = last - first;
      s.throughput_tokens_per_s = tokens / s.duration_s;
      s.decode_throughput_tokens_per_s = output / s.duration_s;
    }
    s.prompt_latency = stats_of(prompt);
    s.decode_latency = stats_of(decode);
    s.admission_wait = stats_of(wait);
    if (config_.window_s > 0) {
      std::vector<double> window_prompt;
      for (const Request& r : requests_)
        if (r.first_token >= 0 && r.first_token <= config_.window_s)
          window_prompt.push_back(r.first_token - r.arrival);
      s.window_s = config_.window_s;
      s.window_decode_throughput_tokens_per_s = window_decode_tokens_ / config_.window_s;
      s.window_prompt_latency = stats_of(window_prompt);
    }
    return s;
  }

  const ServingProblem& problem_;
  const Placement& placement_;
  const RoutingTable& routing_;
  const SimulationConfig& config_;
  std::vector<MachineState> machines_;
  std::vector<Iwrr> iwrr_;
  std::vector<Request> requests_;
  std::deque<int> waiting_;
  std::map<std::pair<int, int>, double> link_free_;
  std::vector<double> nic_in_free_, nic_out_free_;  // per slot(): when each NIC is free again
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  double now_ = 0;
  int64_t seq_ = 0;
  int64_t active_ = 0, rejected_ = 0, batches_ = 0, window_decode_tokens_ = 0;
};

}  // namespace

SimulationResult simulate_serving(const ServingProblem& problem, const Placement& placement,
                                  const RoutingTable& routing, const SimulationConfig& config) {
  const int64_t requests =
      config.trace.empty() ? config.requests : static_cast<int64_t>(config.trace.size());
  if (routing.out.empty() || routing.from(kSource).empty() || requests <= 0) {
    SimulationResult none;
    none.requests = requests;
    none.rejected = requests;
    return none;
  }
  Simulation sim(problem, placement, routing, config);
  return sim.run();
}

}  // namespace hetplan::serve
