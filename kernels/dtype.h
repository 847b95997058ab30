// Element types of the kernels' device buffers. bf16 and fp16 are 16 raw bits here so that host
// code (the CPU references, the profiler) needs no CUDA header; kernels do their math in fp32.
#pragma once

#include <cstdint>
#include <string_view>

namespace hetplan::kernels {

// bfloat16 as stored: the upper 16 bits of an IEEE fp32.
struct bf16 {
  uint16_t bits;
};
// IEEE binary16 as stored.
struct fp16 {
  uint16_t bits;
};

enum class DType { kF32, kBF16, kF16 };

// "fp32", "bf16" or "fp16".
constexpr std::string_view dtype_name(DType t) {
  return t == DType::kF32 ? "fp32" : t == DType::kBF16 ? "bf16" : "fp16";
}
constexpr int dtype_bytes(DType t) { return t == DType::kF32 ? 4 : 2; }

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::kF32;
}
template <>
constexpr DType dtype_of<bf16>() {
  return DType::kBF16;
}
template <>
constexpr DType dtype_of<fp16>() {
  return DType::kF16;
}

}  // namespace hetplan::kernels
