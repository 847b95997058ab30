#include "search/pipeline/pass_order.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace hetplan::pipeline {

std::vector<int> stage_devices(Placement placement, int devices, int chunks) {
  std::vector<int> device(static_cast<size_t>(devices) * chunks);
  for (int j = 0; j < static_cast<int>(device.size()); ++j) {
    if (placement == Placement::kVShape) {
      // Chunk c runs down the devices when c is even and back up when it is odd, so each turn
      // stays on one device and costs no p2p.
      const int c = j / devices, i = j % devices;
      device[j] = c % 2 == 0 ? i : devices - 1 - i;
    } else {
      device[j] = j % devices;
    }
  }
  return device;
}

PassOrder make_order(Placement placement, int devices, int chunks, int microbatches,
                     bool split_backward) {
  PassOrder order;
  order.devices = devices;
  order.stages = devices * chunks;
  order.microbatches = microbatches;
  order.split_backward = split_backward;
  order.device_of_stage = stage_devices(placement, devices, chunks);
  order.chunk_of_stage.assign(order.stages, 0);
  std::vector<int> seen(devices, 0);
  for (int s = 0; s < order.stages; ++s) order.chunk_of_stage[s] = seen[order.device_of_stage[s]]++;
  order.per_device.assign(devices, {});
  return order;
}

void check_order(const PassOrder& order) {
  const int ops = order.split_backward ? 3 : 2;
  const size_t per_stage = static_cast<size_t>(order.microbatches);
  std::vector<int> next(static_cast<size_t>(ops) * order.stages, 0);
  size_t total = 0;
  for (int d = 0; d < order.devices; ++d) {
    for (const Pass& pass : order.per_device[d]) {
      const int op = static_cast<int>(pass.op);
      if (op >= ops || pass.stage < 0 || pass.stage >= order.stages)
        throw std::logic_error(fmt::format("device {}: pass outside the problem", d));
      if (order.device_of_stage[pass.stage] != d)
        throw std::logic_error(
            fmt::format("device {} runs stage {}, placed elsewhere", d, pass.stage));
      int& expected = next[static_cast<size_t>(op) * order.stages + pass.stage];
      if (pass.microbatch != expected)
        throw std::logic_error(fmt::format("stage {} op {}: micro-batch {} where {} was due",
                                           pass.stage, "FBW"[op], pass.microbatch, expected));
      ++expected;
      ++total;
    }
  }
  if (total != per_stage * ops * order.stages)
    throw std::logic_error(
        fmt::format("order has {} passes, expected {}", total, per_stage * ops * order.stages));
}

std::vector<int> order_peaks(const PassOrder& order) {
  const Op release = order.split_backward ? Op::kW : Op::kB;
  std::vector<int> peaks(order.devices, 0);
  for (int d = 0; d < order.devices; ++d) {
    int held = 0;
    for (const Pass& pass : order.per_device[d]) {
      if (pass.op == Op::kF) {
        peaks[d] = std::max(peaks[d], ++held);
      } else if (pass.op == release) {
        --held;
      }
    }
  }
  return peaks;
}

}  // namespace hetplan::pipeline
