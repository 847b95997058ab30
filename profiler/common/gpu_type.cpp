#include "profiler/common/gpu_type.h"

#include <algorithm>
#include <cctype>
#include <vector>

namespace hetplan::profiler {
namespace {

std::vector<std::string> words(std::string_view name) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      cur += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!cur.empty()) {
      out.push_back(cur);
      cur.clear();
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

}  // namespace

std::string slug(std::string_view text) {
  std::string out;
  for (const auto& w : words(text)) {
    if (out.empty() && (w == "nvidia" || w == "tesla")) continue;
    if (!out.empty()) out += '-';
    out += w;
  }
  return out.empty() ? "unknown-gpu" : out;
}

GpuTypeKey gpu_type_key(std::string_view device_name, int64_t memory_bytes) {
  const auto w = words(device_name);
  auto has = [&](std::string_view word) { return std::find(w.begin(), w.end(), word) != w.end(); };
  if (has("h100")) {
    if (has("nvl")) return {"h100-nvl", true};
    if (has("pcie")) return {"h100-pcie", true};
    if (has("sxm") || has("sxm5") || has("hbm3")) return {"h100-sxm", true};
  }
  if (has("h200")) return {"h200", true};
  if (has("a100")) {
    constexpr int64_t k48GiB = int64_t{48} << 30;
    const bool big = has("80gb") || memory_bytes > k48GiB;
    return {big ? "a100-80gb" : "a100-40gb", true};
  }
  if (has("v100")) return {"v100", true};
  if (has("t4")) return {"t4", true};
  if (has("l4")) return {"l4", true};
  if (has("a10g")) return {"a10g", true};
  if (has("a10")) return {"a10", true};
  return {slug(device_name), false};
}

}  // namespace hetplan::profiler
