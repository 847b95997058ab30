// The time-independent part of a schedule: which device holds each virtual stage, and the order in
// which every device runs its passes. Builders produce it; the simulator times it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hetplan::pipeline {

enum class Op : uint8_t { kF = 0, kB = 1, kW = 2 };

// One pass of one micro-batch on one virtual stage.
struct Pass {
  Op op;
  int32_t stage;
  int32_t microbatch;
};

// How virtual stages map to devices.
enum class Placement {
  kLinear,  // stage j on device j mod p (1 chunk: stage i on device i; interleaved otherwise)
  kVShape,  // stage j on device j for j < p, on 2p-1-j after the turn
};

// Device of each of the p*v virtual stages, in model order.
std::vector<int> stage_devices(Placement placement, int devices, int chunks);

struct PassOrder {
  int devices = 0;
  int stages = 0;
  int microbatches = 0;
  bool split_backward = true;  // false: B carries B+W and there are no W passes
  std::vector<int> device_of_stage;
  std::vector<int> chunk_of_stage;  // index of the stage among its device's stages
  std::vector<std::vector<Pass>> per_device;
  std::string variant;     // how it was built, for reports
  std::vector<int> peaks;  // order_peaks(*this) once computed (saves a pass over the order)
};

// A PassOrder with placement filled in and empty device lists.
PassOrder make_order(Placement placement, int devices, int chunks, int microbatches,
                     bool split_backward);

// Checks that every pass appears exactly once on its stage's device and that each stage's F, B and
// W passes come in micro-batch order. Throws std::logic_error naming the first problem.
void check_order(const PassOrder& order);

// Peak chunk activations per device implied by the order alone: an activation is taken when its F
// starts and given back when its W (B when not split) ends, and passes on a device never overlap.
std::vector<int> order_peaks(const PassOrder& order);

}  // namespace hetplan::pipeline
