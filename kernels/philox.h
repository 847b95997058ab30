// Philox4x32-10, the counter-based random generator of Salmon, Moraes, Dror and Shaw, "Parallel
// Random Numbers: As Easy as 1, 2, 3" (SC'11): four 32-bit outputs that are a pure function of a
// 128-bit counter and a 64-bit key. The same function runs on the GPU and in the CPU references,
// so a dropout mask is reproducible anywhere from (seed, offset, element index) alone.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define HETPLAN_PHILOX_FN __host__ __device__ __forceinline__
#else
#define HETPLAN_PHILOX_FN inline
#endif

namespace hetplan::kernels {

struct Philox4 {
  uint32_t v[4];
};

HETPLAN_PHILOX_FN Philox4 philox4x32_10(Philox4 counter, uint32_t key0, uint32_t key1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;    // round multipliers
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;  // key schedule increments
  uint32_t c0 = counter.v[0], c1 = counter.v[1], c2 = counter.v[2], c3 = counter.v[3];
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    c0 = hi1 ^ c1 ^ key0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ key1;
    c3 = lo0;
    key0 += kWeyl0;
    key1 += kWeyl1;
  }
  return Philox4{{c0, c1, c2, c3}};
}

// The four random words of the group holding element `index` of stream (seed, offset): elements
// 4k..4k+3 share one Philox call with counter offset + k.
HETPLAN_PHILOX_FN Philox4 philox_group(uint64_t seed, uint64_t offset, uint64_t index) {
  const uint64_t c = offset + index / 4;
  return philox4x32_10(Philox4{{static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32), 0u, 0u}},
                       static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// Dropout keeps an element when its word is >= this threshold: probability 1 - p.
HETPLAN_PHILOX_FN uint32_t dropout_threshold(float p) {
  if (!(p > 0.0f)) return 0u;
  const double t = static_cast<double>(p) * 4294967296.0;
  return t >= 4294967295.0 ? 4294967295u : static_cast<uint32_t>(t);
}

// A uniform float in [0, 1) from one random word (24 random bits).
HETPLAN_PHILOX_FN float uniform01(uint32_t word) {
  return static_cast<float>(word >> 8) * (1.0f / 16777216.0f);
}

}  // namespace hetplan::kernels
