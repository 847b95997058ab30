#include "profiler/common/kernel_names.h"

#include <algorithm>
#include <cctype>

namespace hetplan::profiler {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool contains_any(const std::string& text, std::initializer_list<std::string_view> words) {
  return std::any_of(words.begin(), words.end(),
                     [&](std::string_view w) { return text.find(w) != std::string::npos; });
}

}  // namespace

bool gemm_main_kernel(std::string_view name) {
  const std::string n = lower(name);
  if (contains_any(n, {"splitkreduce", "memset", "reduce_kernel"})) return false;
  return contains_any(n, {"gemm", "gemv", "xmma", "nvjet", "cutlass", "matmul"});
}

bool tensor_core_kernel(std::string_view name) {
  const std::string n = lower(name);
  if (!gemm_main_kernel(n)) return false;
  if (contains_any(n, {"sgemm", "dgemm", "gemv", "gemmsn", "gemmk1", "ffma", "simt"})) return false;
  return contains_any(n, {"xmma", "hmma", "wgmma", "gmma", "tensorop", "warpgroup", "nvjet", "tf32",
                          "h884", "h1688", "h16816", "s884", "s1688", "s16816", "i8816", "i16832"});
}

bool any_tensor_core(const std::vector<std::string>& names) {
  return std::any_of(names.begin(), names.end(),
                     [](const std::string& n) { return tensor_core_kernel(n); });
}

}  // namespace hetplan::profiler
