// Host conversions between fp32 and the 16-bit storage types, bit-exact with the GPU's
// round-to-nearest-even conversions (cvt.rn), so references see exactly what kernels see.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/dtype.h"

namespace hetplan::kernels {

uint16_t float_to_bf16_bits(float f);
float bf16_bits_to_float(uint16_t bits);
uint16_t float_to_fp16_bits(float f);
float fp16_bits_to_float(uint16_t bits);

inline float to_float(float v) { return v; }
inline float to_float(bf16 v) { return bf16_bits_to_float(v.bits); }
inline float to_float(fp16 v) { return fp16_bits_to_float(v.bits); }

// fp32 -> T, rounding to nearest even.
template <class T>
T from_float(float f);
template <>
inline float from_float<float>(float f) {
  return f;
}
template <>
inline bf16 from_float<bf16>(float f) {
  return bf16{float_to_bf16_bits(f)};
}
template <>
inline fp16 from_float<fp16>(float f) {
  return fp16{float_to_fp16_bits(f)};
}

// Rounds through T and back: the value a T buffer would hold.
template <class T>
float round_to(float f) {
  return to_float(from_float<T>(f));
}

template <class T>
std::vector<float> to_floats(const std::vector<T>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = to_float(v[i]);
  return out;
}
template <class T>
std::vector<T> from_floats(const std::vector<float>& v) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = from_float<T>(v[i]);
  return out;
}

}  // namespace hetplan::kernels
