// Which GPUs to provision: searches hardware and strategy together (the PHAZE idea for GPU users).
// For every mix of node types within the limits, the training search finds the best strategy;
// the result ranks mixes by throughput, cost per hour and cost per token, with the Pareto front.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/hardware.h"
#include "costmodel/model.h"
#include "costmodel/profile.h"
#include "search/search.h"
#include "search/transfer.h"

namespace hetplan {

// Where a mix's node types run: all in one zone (nothing to pay for transfers), each type in a
// zone of its own in one region, or each in a region of its own (clouds often have a GPU type in
// some zones only).
enum class Spread { kOneZone, kZones, kRegions };

struct ProvisionOptions {
  std::vector<std::string> node_types;  // node presets (or files) to choose from
  int64_t max_nodes_per_type = 16;      // counts tried: 0, 1, 2, 4, ... up to this
  int64_t max_types = 2;                // at most this many kinds in one mix
  double max_price_per_hour = 0;        // 0: no budget (on the nodes' price alone)
  Spread spread = Spread::kOneZone;
  std::optional<CloudNetwork> network;  // prices the zone links under kZones and kRegions
  SearchOptions search;                 // global batch, threads, restrictions for each mix
  FrameworkSpec framework = load_framework(std::string(kDefaultFramework));  // what each runs
  // Wall-clock seconds for all the mixes (0: no limit). Each mix's search gets what is left; once
  // it is spent the mixes not yet searched are left out and ProvisionResult says so.
  double time_limit_s = 0;
  std::function<void(size_t done, size_t total)> progress;
};

struct ProvisionedMix {
  ClusterSpec cluster;
  double price_per_hour = 0;  // the nodes'
  bool feasible = false;
  RankedStrategy best;  // when feasible
  double tokens_per_s = 0;
  // The best strategy's traffic over priced links per step, and its price per hour at the
  // predicted step time.
  TransferPerStep transfer;
  double transfer_dollars_per_hour = 0;
  double dollars_per_million_tokens = 0;           // nodes and transfers
  double transfer_dollars_per_million_tokens = 0;  // of that, the transfers'
  bool pareto = false;  // no other mix is both cheaper (nodes and transfers) and faster
  double total_dollars_per_hour() const { return price_per_hour + transfer_dollars_per_hour; }
};

struct ProvisionResult {
  std::vector<ProvisionedMix> mixes;  // by throughput, fastest first; infeasible last
  int64_t mixes_tried = 0;
  int64_t over_budget = 0;    // mixes left out for costing more than max_price_per_hour
  std::string cheapest_over;  // the cheapest of those, and its price
  double cheapest_over_price = 0;
  double elapsed_s = 0;
  bool time_limit_reached = false;  // some mixes were not searched, or searched in part
  int64_t mixes_not_searched = 0;   // left out when the time limit was spent
};

// The price of `mix` (found feasible) per hour and per million tokens, transfers included.
void price_mix(const Evaluator& ev, ProvisionedMix& mix);

ProvisionResult provision(const ModelSpec& model, const Profile& profile,
                          const ProvisionOptions& options);

}  // namespace hetplan
