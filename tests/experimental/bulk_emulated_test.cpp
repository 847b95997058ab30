// The emulator's mbarrier and bulk-copy model (kernels/experimental/emulator/simt_bulk.cpp) through
// the primitives of kernels/experimental/simt_bulk.h: one test per rule, then the known-answer test
// of kernels/experimental/bulk_selftest.h (which the GPU test
// HopperKernelProperties.BulkCopyRingAndReduceGiveTheKnownSums runs on the hardware) and its
// mutations, each of which must be caught.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/experimental/bulk_selftest.h"
#include "kernels/experimental/emulator/simt_sm90.h"
#include "kernels/experimental/simt_bulk.h"
#include "tests/kernels/emulated.h"

namespace hetplan::kernels {
namespace {

using testing::emulate;
using testing::run_block;

// A block of 32 threads: barrier at offset 1024, a 256-byte buffer at offset 0, `src` of 64
// floats 0 .. 63 in global memory. Thread 0 sets the barrier up (count 1).
struct Small {
  std::vector<float> src = std::vector<float>(64);
  emu::GlobalScope scope;
  Small() {
    for (int i = 0; i < 64; ++i) src[static_cast<size_t>(i)] = static_cast<float>(i);
    scope.add(src.data(), src.size());
  }
  static uint64_t* bar() { return reinterpret_cast<uint64_t*>(simt::dynamic_smem() + 1024); }
  static float* buf() { return reinterpret_cast<float*>(simt::dynamic_smem()); }
  static void init(bool fence = true) {
    if (simt::thread_x() == 0) {
      simt::mbarrier_init(bar(), 1);
      if (fence) simt::fence_proxy_async();
    }
    simt::sync_threads();
  }
};
constexpr size_t kSmallSmem = 1024 + 64;

// The copy's bytes read as NaN until a wait observes the phase; then as copied, in every thread.
TEST(BulkEmulated, CopyLandsAtTheWaitThatObservesThePhase) {
  Small s;
  bool nan_before = true, right_after = true;
  const std::string error = run_block(32, kSmallSmem, [&] {
    Small::init();
    if (simt::thread_x() == 0) {
      simt::mbarrier_arrive_expect_tx(Small::bar(), 256);
      simt::bulk_copy_g2s(Small::buf(), s.src.data(), 256, Small::bar());
      nan_before = nan_before && std::isnan(Small::buf()[5]);
    }
    simt::mbarrier_wait(Small::bar(), 0);
    right_after = right_after && Small::buf()[5] == 5.0f && Small::buf()[63] == 63.0f;
  });
  EXPECT_EQ(error, "");
  EXPECT_TRUE(nan_before);
  EXPECT_TRUE(right_after);
}

// The copy may complete before the expect_tx (the tx-count goes below zero while an arrival is
// pending): legal, as on the GPU.
TEST(BulkEmulated, CopyBeforeExpectTxIsAllowed) {
  Small s;
  float got = 0.0f;
  const std::string error = run_block(32, kSmallSmem, [&] {
    Small::init();
    if (simt::thread_x() == 0) {
      simt::bulk_copy_g2s(Small::buf(), s.src.data(), 128, Small::bar());
      simt::bulk_copy_g2s(Small::buf() + 32, s.src.data() + 32, 128, Small::bar());
      simt::mbarrier_arrive_expect_tx(Small::bar(), 256);
    }
    simt::mbarrier_wait(Small::bar(), 0);
    if (simt::thread_x() == 7) got = Small::buf()[40];
  });
  EXPECT_EQ(error, "");
  EXPECT_EQ(got, 40.0f);
}

TEST(BulkEmulated, ExpectTxBelowTheCopiedBytesThrows) {
  Small s;
  const std::string error = run_block(32, kSmallSmem, [&] {
    Small::init();
    if (simt::thread_x() == 0) {
      simt::mbarrier_arrive_expect_tx(Small::bar(), 240);
      simt::bulk_copy_g2s(Small::buf(), s.src.data(), 256, Small::bar());
    }
    simt::mbarrier_wait(Small::bar(), 0);
  });
  EXPECT_ERROR_HAS(error, "tx-count underflow");
  EXPECT_ERROR_HAS(error, "16 bytes more than arrive.expect_tx announced");
}

// A phase that never completes is a deadlock; the report names the bytes still expected.
TEST(BulkEmulated, ExpectTxAboveTheCopiedBytesDeadlocksNamingTheTxCount) {
  Small s;
  const std::string error = run_block(32, kSmallSmem, [&] {
    Small::init();
    if (simt::thread_x() == 0) {
      simt::mbarrier_arrive_expect_tx(Small::bar(), 272);
      simt::bulk_copy_g2s(Small::buf(), s.src.data(), 256, Small::bar());
    }
    simt::mbarrier_wait(Small::bar(), 0);
  });
  EXPECT_ERROR_HAS(error, "deadlock");
  EXPECT_ERROR_HAS(error, "0 of 1 arrivals pending, tx-count 16 bytes outstanding");
}

TEST(BulkEmulated, TxCountBeyondItsRangeThrows) {
  const std::string error = run_block(32, kSmallSmem, [&] {
    Small::init();
    if (simt::thread_x() == 0) simt::mbarrier_arrive_expect_tx(Small::bar(), 1u << 20);
  });
  EXPECT_ERROR_HAS(error, "outside the range");
}

// Waiting twice with the same parity returns the phase seen before (the GPU would let the
// thread read a stage not yet refilled): the emulator refuses it.
TEST(BulkEmulated, WaitWithAStaleParityThrows) {
  const std::string error = run_block(32, kSmallSmem, [&] {
    Small::init();
    if (simt::thread_x() == 0) simt::mbarrier_arrive(Small::bar());
    simt::mbarrier_wait(Small::bar(), 0);
    simt::mbarrier_wait(Small::bar(), 0);
  });
  EXPECT_ERROR_HAS(error, "has observed already (wrong parity");
}

// A first wait may return the phase before the first (parity 1 on a fresh barrier: the
// producer's pass through an empty stage) or phase 0, never a later one.
TEST(BulkEmulated, WaitThatSkipsAPhaseThrows) {
  bool passed_fresh = false;
  const std::string fine = run_block(32, kSmallSmem, [&] {
    Small::init();
    simt::mbarrier_wait(Small::bar(), 1);
    if (simt::thread_x() == 0) passed_fresh = true;
  });
  EXPECT_EQ(fine, "");
  EXPECT_TRUE(passed_fresh);
  const std::string error = run_block(32, kSmallSmem, [&] {
    Small::init();
    if (simt::thread_x() == 0) {
      simt::mbarrier_arrive(Small::bar());  // phase 0 completes
      simt::mbarrier_arrive(Small::bar());  // phase 1 completes
      simt::mbarrier_wait(Small::bar(), 1);
    }
  });
  EXPECT_ERROR_HAS(error, "returns the completion of phase 1, skipping a phase");
}

TEST(BulkEmulated, ArrivalsBeyondTheCountThrow) {
  const std::string error = run_block(32, kSmallSmem, [&] {
    Small::init();
    if (simt::thread_x() == 0) {
      simt::mbarrier_arrive_expect_tx(Small::bar(), 16);  // phase 0 now waits for bytes only
      simt::mbarrier_arrive(Small::bar());
    }
  });
  EXPECT_ERROR_HAS(error, "more arrivals than its count of 1");
}

TEST(BulkEmulated, UninitialisedBarrierThrows) {
  const std::string error =
      run_block(32, kSmallSmem, [&] { simt::mbarrier_wait(Small::bar(), 0); });
  EXPECT_ERROR_HAS(error, "which no mbarrier.init of this block set up");
}

// mbarrier.init writes through the generic proxy; the copy's complete_tx (async proxy) needs the
// initialising thread's fence.proxy.async first.
TEST(BulkEmulated, CopyOntoAnUnfencedInitThrows) {
  Small s;
  const std::string error = run_block(32, kSmallSmem, [&] {
    Small::init(/*fence=*/false);
    if (simt::thread_x() == 0) {
      simt::mbarrier_arrive_expect_tx(Small::bar(), 256);
      simt::bulk_copy_g2s(Small::buf(), s.src.data(), 256, Small::bar());
    }
    simt::mbarrier_wait(Small::bar(), 0);
  });
  EXPECT_ERROR_HAS(error, "complete_tx on its mbarrier reads shared memory at offset 1024");
  EXPECT_ERROR_HAS(error, "without a fence.proxy.async");
}

TEST(BulkEmulated, CopySizeAndAlignmentRules) {
  Small s;
  auto copy = [&](int dst_offset, int src_offset, uint32_t bytes) {
    return run_block(32, kSmallSmem, [&] {
      Small::init();
      if (simt::thread_x() == 0) {
        simt::mbarrier_arrive_expect_tx(Small::bar(), bytes);
        simt::bulk_copy_g2s(simt::dynamic_smem() + dst_offset,
                            reinterpret_cast<const unsigned char*>(s.src.data()) + src_offset,
                            bytes, Small::bar());
      }
      simt::mbarrier_wait(Small::bar(), 0);
    });
  };
  EXPECT_EQ(copy(0, 0, 32), "");
  EXPECT_ERROR_HAS(copy(0, 0, 24), "not a positive multiple of 16");
  EXPECT_ERROR_HAS(copy(8, 0, 32), "16-byte aligned");
  EXPECT_ERROR_HAS(copy(0, 4, 32), "16-byte aligned");
  EXPECT_ERROR_HAS(copy(0, 16, 256), "out-of-bounds");       // past the end of src
  EXPECT_ERROR_HAS(copy(1024, 0, 32), "overlaps mbarrier");  // onto the barrier
}

// A second copy into bytes whose first copy no wait has observed: those bytes read as NaN (on
// the GPU the two land in either order).
TEST(BulkEmulated, RefillBeforeTheReadersWaitedReadsNaN) {
  Small s;
  float got = 0.0f;
  const std::string error = run_block(32, kSmallSmem, [&] {
    uint64_t* bar2 = Small::bar() - 1;  // offset 1016
    if (simt::thread_x() == 0) {
      simt::mbarrier_init(Small::bar(), 1);
      simt::mbarrier_init(bar2, 1);
      simt::fence_proxy_async();
    }
    simt::sync_threads();
    if (simt::thread_x() == 0) {
      simt::mbarrier_arrive_expect_tx(Small::bar(), 256);
      simt::bulk_copy_g2s(Small::buf(), s.src.data(), 256, Small::bar());
      simt::mbarrier_arrive_expect_tx(bar2, 128);
      simt::bulk_copy_g2s(Small::buf(), s.src.data() + 32, 128, bar2);
    }
    simt::sync_threads();  // thread 0's first wait then lands the first copy before thread 3's
    simt::mbarrier_wait(Small::bar(), 0);
    if (simt::thread_x() == 3) got = Small::buf()[3];
    simt::sync_threads();
    simt::mbarrier_wait(bar2, 0);
  });
  EXPECT_EQ(error, "");
  EXPECT_TRUE(std::isnan(got)) << got;
}

// ---- bulk reduce ----

// 32 threads each store 4 floats (t, t + 0.25, ...) to shared memory; thread 0 adds them to a
// global buffer of 128 floats holding 10 with one reduce. `steps` switch the PTX ISA's steps off.
struct ReduceSteps {
  bool fence = true, wait = true, rewrite_after = false;
};
std::string small_reduce(const ReduceSteps& steps, std::vector<float>& out) {
  out.assign(128, 10.0f);
  emu::GlobalScope scope;
  scope.add(out.data(), out.size());
  return run_block(32, 512, [&] {
    float* src = reinterpret_cast<float*>(simt::dynamic_smem());
    const int t = simt::thread_x();
    for (int j = 0; j < 4; ++j) simt::sts_f32(src + 4 * t + j, static_cast<float>(t) + 0.25f * j);
    if (steps.fence) simt::fence_proxy_async();
    simt::sync_threads();
    if (t == 0) {
      simt::bulk_reduce_add_f32(out.data(), src, 512);
      simt::bulk_commit();
      if (steps.wait) simt::bulk_wait_read<0>();
    }
    simt::sync_threads();
    if (steps.rewrite_after) simt::sts_f32(src + 4 * t, -1.0f);
  });
}

TEST(BulkEmulated, ReduceAddsToGlobalMemory) {
  std::vector<float> out;
  ReduceSteps steps;
  steps.rewrite_after = true;  // after the wait: allowed
  EXPECT_EQ(small_reduce(steps, out), "");
  EXPECT_EQ(out[0], 10.0f);
  EXPECT_EQ(out[4 * 7 + 2], 10.0f + 7.5f);
  EXPECT_EQ(out[127], 10.0f + 31.75f);
}

TEST(BulkEmulated, ReduceOfUnfencedStoresThrows) {
  std::vector<float> out;
  ReduceSteps steps;
  steps.fence = false;
  const std::string error = small_reduce(steps, out);
  EXPECT_ERROR_HAS(error, "cp.reduce.async.bulk reads shared memory at offset 0");
  EXPECT_ERROR_HAS(error, "without a fence.proxy.async");
}

TEST(BulkEmulated, RewritingTheSourceBeforeTheWaitThrows) {
  std::vector<float> out;
  ReduceSteps steps;
  steps.wait = false;
  steps.rewrite_after = true;
  EXPECT_ERROR_HAS(small_reduce(steps, out), "while a cp.reduce.async.bulk still reads it");
}

TEST(BulkEmulated, ExitingWithAReduceNeverWaitedForThrows) {
  std::vector<float> out;
  ReduceSteps steps;
  steps.wait = false;
  EXPECT_ERROR_HAS(small_reduce(steps, out), "never waited for");
}

// The source is read at the wait, not at issue; wait_group.read<1> retires all but the newest.
TEST(BulkEmulated, ReduceReadsItsSourceAtTheWait) {
  std::vector<float> out(32, 0.0f);
  emu::GlobalScope scope;
  scope.add(out.data(), out.size());
  bool first_done_early = false, second_pending = false;
  const std::string error = run_block(32, 256, [&] {
    float* src = reinterpret_cast<float*>(simt::dynamic_smem());
    if (simt::thread_x() != 0) return;
    for (int i = 0; i < 32; ++i) simt::sts_f32(src + i, 1.0f);
    simt::fence_proxy_async();
    simt::bulk_reduce_add_f32(out.data(), src, 64);
    simt::bulk_commit();
    simt::bulk_reduce_add_f32(out.data() + 16, src + 16, 64);
    simt::bulk_commit();
    first_done_early = out[0] == 0.0f;  // nothing read yet
    simt::bulk_wait_read<1>();
    first_done_early = first_done_early && out[0] == 1.0f;
    second_pending = out[16] == 0.0f;
    simt::bulk_wait_read<0>();
    second_pending = second_pending && out[16] == 1.0f;
  });
  EXPECT_EQ(error, "");
  EXPECT_TRUE(first_done_early);
  EXPECT_TRUE(second_pending);
}

TEST(BulkEmulated, ReduceSizeRule) {
  std::vector<float> out(32, 0.0f);
  emu::GlobalScope scope;
  scope.add(out.data(), out.size());
  const std::string error = run_block(32, 256, [&] {
    float* src = reinterpret_cast<float*>(simt::dynamic_smem());
    if (simt::thread_x() == 0) simt::bulk_reduce_add_f32(out.data(), src, 8);
  });
  EXPECT_ERROR_HAS(error, "not a positive multiple of 16");
}

// ---- setmaxnreg ----

// setmaxnreg: 24 / 240 for one producer and two consumer warpgroups fits 65536 registers;
// 248 for the consumers does not (an .inc that waits forever on the GPU), a block of 288
// threads is not whole warpgroups, and warps of one warpgroup must agree.
TEST(BulkEmulated, SetmaxnregChecksItsRules) {
  EXPECT_EQ(run_block(384, 64,
                      [] {
                        if (simt::warp() >= 8)
                          simt::setmaxnreg<24, false>();
                        else
                          simt::setmaxnreg<240, true>();
                      }),
            "");
  EXPECT_ERROR_HAS(run_block(384, 64,
                             [] {
                               if (simt::warp() >= 8)
                                 simt::setmaxnreg<24, false>();
                               else
                                 simt::setmaxnreg<248, true>();
                             }),
                   "more than the SM's 65536");
  EXPECT_ERROR_HAS(run_block(288, 64, [] { simt::setmaxnreg<24, false>(); }),
                   "not whole warpgroups");
  EXPECT_ERROR_HAS(run_block(128, 64,
                             [] {
                               if (simt::warp() == 0)
                                 simt::setmaxnreg<232, true>();
                               else
                                 simt::setmaxnreg<240, true>();
                             }),
                   "of its warpgroup for");
}

// An arrive that completes a phase lets every other warp run before the arriving thread goes
// on: a thread that frees a reduce's source (arrive) before the reduce has read it (wait_group
// .read) is caught when a waiter rewrites the source, in index order and shuffled; freed after
// the wait, the same exchange is fine and adds the value once.
TEST(BulkEmulated, ArriveCompletingAPhaseLetsTheOtherWarpsRunFirst) {
  for (bool early : {true, false}) {
    for (uint64_t seed : {0, 1, 2, 3}) {
      SCOPED_TRACE(::testing::Message() << (early ? "early" : "in order") << ", seed " << seed);
      std::vector<float> dst(4, 0.0f);
      emu::GlobalScope scope;
      scope.add(dst.data(), dst.size());
      const std::string error = run_block(
          64, kSmallSmem,
          [&] {
            Small::init();
            if (simt::thread_x() == 0) {
              for (int i = 0; i < 4; ++i) simt::sts_f32(Small::buf() + i, 1.0f);
              simt::fence_proxy_async();
              simt::bulk_reduce_add_f32(dst.data(), Small::buf(), 16);
              simt::bulk_commit();
              if (early) simt::mbarrier_arrive(Small::bar());
              simt::bulk_wait_read<0>();
              if (!early) simt::mbarrier_arrive(Small::bar());
            } else if (simt::thread_x() == 32) {
              simt::mbarrier_wait(Small::bar(), 0);
              simt::sts_f32(Small::buf(), 2.0f);
            }
          },
          seed);
      if (early) {
        EXPECT_ERROR_HAS(error, "while a cp.reduce.async.bulk still reads it");
      } else {
        EXPECT_EQ(error, "");
        EXPECT_EQ(dst[0], 1.0f);
      }
    }
  }
}

// ---- the GPU's mbarrier watchdog (mbarrier_watchdog.h): its loop on a simulated clock ----

// A simulated wait: try_wait fails `failures` times (then succeeds), each try taking 1 us of
// the simulated clock; counts the tries and the clock's readings and records give_up.
struct SimulatedWait {
  int64_t failures;
  int64_t tries = 0, readings = 0, gave_up_at_try = -1;
  uint64_t now_ns = 0, waited_ns = 0;

  void run() {
    simt::spin_with_watchdog(
        [&] {
          now_ns += 1000;
          return tries++ >= failures || gave_up_at_try >= 0;
        },
        [&] {
          ++readings;
          return now_ns;
        },
        [&](uint64_t waited) {  // on the GPU: print and trap; here: let the next try succeed
          gave_up_at_try = tries;
          waited_ns = waited;
        });
  }
};

// A phase that never completes: 4096 failures without the clock, the first reading at 4.096 ms,
// then one reading per failure until 1 s has passed since it: 1,000,000 more failures.
TEST(MbarrierWatchdog, GivesUpOneSecondAfterItsFirstReading) {
  SimulatedWait w{int64_t{1} << 40};
  w.run();
  EXPECT_EQ(w.gave_up_at_try, 4096 + 1'000'000);
  EXPECT_EQ(w.readings, 1 + 1'000'000);
  EXPECT_EQ(w.waited_ns, simt::kMbarrierWatchdogLimitNs);
}

// The fast path: a wait that completes within 4096 failed tries never reads the clock; a longer
// one reads it once per failure from the 4096th on, and does not give up short of the limit.
TEST(MbarrierWatchdog, ReadsTheClockOnlyAfter4096Failures) {
  SimulatedWait quick{4095};
  quick.run();
  EXPECT_EQ(quick.tries, 4096);
  EXPECT_EQ(quick.readings, 0);
  SimulatedWait slow{5000};
  slow.run();
  EXPECT_EQ(slow.tries, 5001);
  EXPECT_EQ(slow.readings, 1 + (5000 - 4096));
  EXPECT_EQ(slow.gave_up_at_try, -1);
  SimulatedWait almost{4096 + 999'999};  // the last failure at 999,999 us past the first reading
  almost.run();
  EXPECT_EQ(almost.gave_up_at_try, -1);
}

// A clock going backwards (the driver may set %globaltimer) starts the second again instead of
// giving up at once on the unsigned difference.
TEST(MbarrierWatchdog, AClockGoingBackwardsRestartsTheCount) {
  const std::vector<uint64_t> clock = {5'000'000'000, 1'000'000'000, 1'999'999'999, 2'000'000'000};
  size_t reading = 0;
  uint64_t waited_ns = 0;
  simt::spin_with_watchdog([&] { return reading == clock.size(); },
                           [&] { return clock.at(reading++); },
                           [&](uint64_t waited) { waited_ns = waited; });
  EXPECT_EQ(reading, clock.size());
  EXPECT_EQ(waited_ns, uint64_t{1'000'000'000});
}

// ---- the known-answer test and its mutations ----

template <int kMutation>
std::string run_selftest(std::vector<float>& out, uint64_t seed = 0) {
  const std::vector<float> src = bulk_selftest_source();
  out.assign(kBulkSelftestOutFloats, kBulkSelftestBase);
  emu::GlobalScope scope;
  scope.add(src.data(), src.size());
  scope.add(out.data(), out.size());
  LaunchShape shape;
  shape.grid_x = kBulkSelftestBlocks;
  shape.block = kBulkSelftestThreads;
  shape.smem = kBulkSelftestSmem;
  try {
    emulate(
        shape, [&] { bulk_selftest_block<kMutation>(src.data(), out.data()); }, seed);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(BulkEmulated, SelftestGivesTheKnownSums) {
  for (uint64_t seed : {0, 1, 2, 3}) {
    SCOPED_TRACE(::testing::Message() << "schedule seed " << seed);
    std::vector<float> out;
    EXPECT_EQ(run_selftest<kBulkMutationNone>(out, seed), "");
    const BulkSelftestReport r = bulk_selftest_check(out);
    EXPECT_EQ(r.wrong, 0) << r.detail;
  }
  // The answer is not trivial: the sums differ between elements and from the base.
  EXPECT_NE(bulk_selftest_expected(0), bulk_selftest_expected(1));
  EXPECT_NE(bulk_selftest_expected(0), kBulkSelftestBase);
  EXPECT_EQ(bulk_selftest_expected(kBulkSelftestTileFloats), kBulkSelftestBase + 10.0f);
}

// Each mutation, under the default and a shuffled schedule: the emulator throws an error holding
// `error_part`, or (error_part "": a race, whose symptom depends on the schedule) throws anything
// or lets the sums come out wrong.
template <int kMutation>
void expect_caught(const std::string& error_part) {
  for (uint64_t seed : {0, 5}) {
    SCOPED_TRACE(::testing::Message() << "mutation " << kMutation << ", seed " << seed);
    std::vector<float> out;
    const std::string error = run_selftest<kMutation>(out, seed);
    if (!error_part.empty()) {
      EXPECT_ERROR_HAS(error, error_part);
    } else if (error.empty()) {
      EXPECT_GT(bulk_selftest_check(out).wrong, 0);
    } else {
      std::printf("mutation %d, seed %d: %s\n", kMutation, static_cast<int>(seed), error.c_str());
    }
  }
}

TEST(BulkEmulated, SelftestMutationsAreCaught) {
  expect_caught<kBulkMutationNoFullWait>("");
  expect_caught<kBulkMutationShortExpectTx>("tx-count underflow");
  expect_caught<kBulkMutationLongExpectTx>("tx-count 16 bytes outstanding");
  expect_caught<kBulkMutationWrongParity>("wrong parity");
  expect_caught<kBulkMutationNoEmptyWait>("");
  expect_caught<kBulkMutationNoInitFence>("complete_tx on its mbarrier reads");
  expect_caught<kBulkMutationNoSourceFence>("cp.reduce.async.bulk reads shared memory");
  expect_caught<kBulkMutationReuseBeforeWait>("while a cp.reduce.async.bulk still reads it");
  expect_caught<kBulkMutationNoFinalWait>("never waited for");
  expect_caught<kBulkMutationReduceOf8Bytes>("not a positive multiple of 16");
}

}  // namespace
}  // namespace hetplan::kernels
