// A known-answer test of the mbarrier and bulk-copy primitives (kernels/experimental/simt_bulk.h),
// run under the emulator (tests/experimental/bulk_emulated_test.cpp) and on an sm_90a GPU
// (kernels/experimental/sm90a/bulk_selftest.cu, tests/gpu/kernel_properties_test.cpp
// HopperKernelProperties.BulkCopyRingAndReduceGiveTheKnownSums). If the hardware and the emulator's
// model disagree about a primitive, the sums differ or the GPU hangs (a phase that never
// completes) where the emulator passed.
//
// Each of kBulkSelftestBlocks blocks: a producer thread (thread 128, warp 4) streams
// kBulkSelftestTiles tiles of 512 floats from global memory through a ring of 3 stages, each
// tile as two bulk copies (1536 + 512 bytes) completing on the stage's "full" barrier after an
// arrive.expect_tx of 2048; 128 consumer threads wait on "full" (parity: the round's), add their
// 4 floats of the tile into registers and arrive on the stage's "empty" barrier (count 128), on
// which the producer waits before refilling the stage. Every stage goes through 2-3 rounds, so
// both parities and the producer's pass-through first wait are used. Then the consumers write
// their sums to shared memory (generic stores, fence.proxy.async, barrier) and two threads add
// them to out[0 .. 512) with bulk reduces (three of them, in two threads' groups); after
// wait_group.read the same buffer is rewritten with block + 1 and reduced into out[512 .. 1024).
// The host fills out with 1000. Tile values are small integers, so every sum is exact in fp32.
//
// kMutation (the CPU test's mutations; the GPU runs kBulkMutationNone) leaves out one step the
// PTX ISA requires or gets one wrong: each must make the emulator throw or the sums wrong.
#pragma once

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/experimental/simt_bulk.h"

namespace hetplan::kernels {

constexpr int kBulkSelftestBlocks = 4;
constexpr int kBulkSelftestThreads = 160;  // 128 consumers, then the producer's warp
constexpr int kBulkSelftestProducer = 128;
constexpr int kBulkSelftestStages = 3;
constexpr int kBulkSelftestTiles = 8;
constexpr int kBulkSelftestTileFloats = 512;
constexpr uint32_t kBulkSelftestTileBytes = kBulkSelftestTileFloats * 4;
constexpr uint32_t kBulkSelftestFirstCopy = 1536;  // then the remaining 512 bytes
constexpr int kBulkSelftestOutFloats = 2 * kBulkSelftestTileFloats;
constexpr float kBulkSelftestBase = 1000.0f;  // out's initial value
// Shared memory: the stages, the reduce source, then the barriers (full[3], empty[3]).
constexpr uint32_t kBulkSelftestRedOffset = kBulkSelftestStages * kBulkSelftestTileBytes;
constexpr uint32_t kBulkSelftestBarOffset = kBulkSelftestRedOffset + kBulkSelftestTileBytes;
constexpr size_t kBulkSelftestSmem = kBulkSelftestBarOffset + 2 * kBulkSelftestStages * 8;
constexpr size_t kBulkSelftestSrcFloats =
    size_t{kBulkSelftestBlocks} * kBulkSelftestTiles * kBulkSelftestTileFloats;

enum BulkMutation {
  kBulkMutationNone,
  kBulkMutationNoFullWait,       // consumers read a stage without waiting on "full"
  kBulkMutationShortExpectTx,    // expect_tx announces 16 bytes fewer than the copies bring
  kBulkMutationLongExpectTx,     // ... 16 bytes more
  kBulkMutationWrongParity,      // consumers always wait with parity 0
  kBulkMutationNoEmptyWait,      // the producer refills a stage without waiting on "empty"
  kBulkMutationNoInitFence,      // no fence.proxy.async after mbarrier.init
  kBulkMutationNoSourceFence,    // no fence.proxy.async between the sums' stores and the reduce
  kBulkMutationReuseBeforeWait,  // the reduce source rewritten before wait_group.read
  kBulkMutationNoFinalWait,      // threads exit with their last reduce never waited for
  kBulkMutationReduceOf8Bytes,   // a reduce of 8 bytes (sizes are multiples of 16)
};

// Element i of tile t of block b: an integer in -8 .. 8.
HETPLAN_HD float bulk_selftest_value(int b, int t, int i) {
  return static_cast<float>((b * 5 + t * 3 + i) % 17 - 8);
}

inline std::vector<float> bulk_selftest_source() {
  std::vector<float> src(kBulkSelftestSrcFloats);
  for (int b = 0; b < kBulkSelftestBlocks; ++b)
    for (int t = 0; t < kBulkSelftestTiles; ++t)
      for (int i = 0; i < kBulkSelftestTileFloats; ++i)
        src[(static_cast<size_t>(b) * kBulkSelftestTiles + t) * kBulkSelftestTileFloats + i] =
            bulk_selftest_value(b, t, i);
  return src;
}

inline float bulk_selftest_expected(int i) {
  double sum = kBulkSelftestBase;
  for (int b = 0; b < kBulkSelftestBlocks; ++b) {
    if (i < kBulkSelftestTileFloats) {
      for (int t = 0; t < kBulkSelftestTiles; ++t) sum += bulk_selftest_value(b, t, i);
    } else {
      sum += b + 1;
    }
  }
  return static_cast<float>(sum);
}

// Run by kBulkSelftestThreads threads of each of kBulkSelftestBlocks blocks, with
// kBulkSelftestSmem bytes of dynamic shared memory; `src` is bulk_selftest_source() in global
// memory, `out` kBulkSelftestOutFloats floats of kBulkSelftestBase.
template <int kMutation>
HETPLAN_DEVICE void bulk_selftest_block(const float* src, float* out) {
  unsigned char* smem = simt::dynamic_smem();
  float* red = reinterpret_cast<float*>(smem + kBulkSelftestRedOffset);
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kBulkSelftestBarOffset);
  uint64_t* empty = full + kBulkSelftestStages;
  const int t = simt::thread_x();
  const int b = static_cast<int>(simt::block_x());
  if (t == 0) {
    for (int s = 0; s < kBulkSelftestStages; ++s) {
      simt::mbarrier_init(&full[s], 1);
      simt::mbarrier_init(&empty[s], kBulkSelftestProducer);
    }
    if (kMutation != kBulkMutationNoInitFence) simt::fence_proxy_async();
  }
  simt::sync_threads();

  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (t == kBulkSelftestProducer) {
    constexpr uint32_t kExpect =
        kMutation == kBulkMutationShortExpectTx  ? kBulkSelftestTileBytes - 16
        : kMutation == kBulkMutationLongExpectTx ? kBulkSelftestTileBytes + 16
                                                 : kBulkSelftestTileBytes;
    for (int tile = 0; tile < kBulkSelftestTiles; ++tile) {
      const int s = tile % kBulkSelftestStages, round = tile / kBulkSelftestStages;
      if (kMutation != kBulkMutationNoEmptyWait) simt::mbarrier_wait(&empty[s], (round & 1) ^ 1);
      simt::mbarrier_arrive_expect_tx(&full[s], kExpect);
      const float* g =
          src + (static_cast<int64_t>(b) * kBulkSelftestTiles + tile) * kBulkSelftestTileFloats;
      unsigned char* stage = smem + s * kBulkSelftestTileBytes;
      simt::bulk_copy_g2s(stage, g, kBulkSelftestFirstCopy, &full[s]);
      simt::bulk_copy_g2s(stage + kBulkSelftestFirstCopy, g + kBulkSelftestFirstCopy / 4,
                          kBulkSelftestTileBytes - kBulkSelftestFirstCopy, &full[s]);
    }
  } else if (t < kBulkSelftestProducer) {
    for (int tile = 0; tile < kBulkSelftestTiles; ++tile) {
      const int s = tile % kBulkSelftestStages, round = tile / kBulkSelftestStages;
      if (kMutation != kBulkMutationNoFullWait)
        simt::mbarrier_wait(&full[s], kMutation == kBulkMutationWrongParity ? 0 : round & 1);
      float v[4];
      simt::unpack<float, 4>(simt::lds16(smem + s * kBulkSelftestTileBytes + 16 * t), v);
      for (int j = 0; j < 4; ++j) acc[j] += v[j];
      simt::mbarrier_arrive(&empty[s]);
    }
  }

  // Round 1: the sums; round 2: block + 1. Threads 0 and 32 issue the reduces.
  for (int round = 0; round < 2; ++round) {
    if (t < kBulkSelftestProducer)
      for (int j = 0; j < 4; ++j)
        simt::sts_f32(red + 4 * t + j, round == 0 ? acc[j] : static_cast<float>(b + 1));
    if (kMutation != kBulkMutationNoSourceFence) simt::fence_proxy_async();
    simt::sync_threads();
    float* dst = out + round * kBulkSelftestTileFloats;
    if (t == 0) {  // two groups of one reduce each
      simt::bulk_reduce_add_f32(dst, red, kMutation == kBulkMutationReduceOf8Bytes ? 8 : 512);
      simt::bulk_commit();
      simt::bulk_reduce_add_f32(dst + 128, red + 128, 512);
      simt::bulk_commit();
    } else if (t == 32) {  // one reduce of 1 KB
      simt::bulk_reduce_add_f32(dst + 256, red + 256, 1024);
      simt::bulk_commit();
    }
    const bool skip_wait = (round == 0 && kMutation == kBulkMutationReuseBeforeWait) ||
                           (round == 1 && kMutation == kBulkMutationNoFinalWait);
    if (!skip_wait) simt::bulk_wait_read<0>();  // the source may be rewritten after this ...
    simt::sync_threads();                       // ... by every thread
  }
}

// Wrong elements of `out` and a description of the first few.
struct BulkSelftestReport {
  int wrong = 0;
  std::string detail;
};

inline BulkSelftestReport bulk_selftest_check(const std::vector<float>& out) {
  BulkSelftestReport r;
  std::ostringstream os;
  for (int i = 0; i < kBulkSelftestOutFloats; ++i) {
    const float got = out.at(static_cast<size_t>(i)), want = bulk_selftest_expected(i);
    if (got == want) continue;
    if (r.wrong++ < 4) os << " out[" << i << "] = " << got << " (want " << want << ");";
  }
  if (r.wrong > 0) os << " " << r.wrong << " of " << kBulkSelftestOutFloats << " wrong";
  r.detail = os.str();
  return r;
}

}  // namespace hetplan::kernels
