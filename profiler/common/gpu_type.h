// Maps the name the driver reports ("NVIDIA H100 80GB HBM3") to hetplan's GPU type key
// ("h100-sxm"), the key of presets/gpus and of every calibration and profile file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace hetplan::profiler {

struct GpuTypeKey {
  std::string key;
  bool known = false;  // false: a slug of the name, no preset matches (the caller warns)
};

// Rules, on the name split into words at spaces, hyphens and underscores, matched whole-word and
// case-insensitively: H100 with SXM or HBM3 -> h100-sxm, H100 with PCIe -> h100-pcie, H100 NVL ->
// h100-nvl, H200 -> h200, A100 -> a100-80gb when the name says 80GB or the card has more than
// 48 GiB, else a100-40gb; V100 -> v100, T4 -> t4, L4 -> l4 (not L40/L40S), A10G -> a10g, A10 ->
// a10. Anything else: the slug of the name without the vendor word ("NVIDIA GeForce RTX 4090" ->
// "geforce-rtx-4090"), known = false.
GpuTypeKey gpu_type_key(std::string_view device_name, int64_t memory_bytes);
// Lower-case, runs of other characters as one '-', no leading "nvidia-" or "tesla-".
std::string slug(std::string_view text);

}  // namespace hetplan::profiler
