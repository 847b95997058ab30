#include "kernels/reference/numeric.h"

#include <bit>
#include <cmath>

namespace hetplan::kernels {

uint16_t float_to_bf16_bits(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<uint16_t>(u >> 16);
}

float bf16_bits_to_float(uint16_t bits) { return std::bit_cast<float>(uint32_t{bits} << 16); }

uint16_t float_to_fp16_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u)
    return static_cast<uint16_t>(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (ax < 0x38800000u) {
    // Below 2^-14: a subnormal half, i.e. an integer multiple of 2^-24 (exact scaling, then RNE).
    const float scaled = std::bit_cast<float>(ax) * 16777216.0f;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  uint32_t r = ax - ((127u - 15u) << 23);  // rebias the exponent
  r += 0xfffu + ((r >> 13) & 1u);          // round the mantissa to 10 bits, ties to even
  return static_cast<uint16_t>(sign | (r >> 13));
}

float fp16_bits_to_float(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {
    const float v = static_cast<float>(mantissa) * 5.9604644775390625e-08f;  // 2^-24
    return sign ? -v : v;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

}  // namespace hetplan::kernels
