// The emulator's named barriers (bar.sync id, count; kernels/emulator/simt_emulator.h) through
// kernels/simt.h's named_barrier_sync: the participants ordered, the others untouched, and the
// count rules, each of which must be caught.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/emulator/simt_emulator.h"
#include "kernels/simt.h"
#include "tests/kernels/emulated.h"

namespace hetplan::kernels {
namespace {

using testing::emulate;
using testing::run_block;

// Warps 0-3 exchange a value through shared memory behind bar.sync 1, 128 while warps 4-5 never
// take part: every reader sees its partner's value, in index order and shuffled.
TEST(NamedBarrierEmulated, OrdersItsParticipantsOnly) {
  for (const uint64_t seed : {uint64_t{0}, uint64_t{3}, uint64_t{4}}) {
    std::vector<float> out(128, -1.0f);
    emu::GlobalScope scope;
    scope.add(out.data(), out.size());
    const std::string error = run_block(
        192, 512,
        [&] {
          const int t = simt::thread_x();
          if (t >= 128) return;
          float* buf = reinterpret_cast<float*>(simt::dynamic_smem());
          buf[t] = static_cast<float>(t);
          simt::named_barrier_sync<1>(128);
          out[static_cast<size_t>(t)] = buf[127 - t];
        },
        seed);
    EXPECT_EQ(error, "");
    for (int t = 0; t < 128; ++t) EXPECT_EQ(out[static_cast<size_t>(t)], 127.0f - t) << t;
  }
}

// A count below the threads that take part releases them in groups that order nothing between
// each other: the second round releases other warps than the first.
TEST(NamedBarrierEmulated, CountBelowTheParticipantsThrows) {
  const std::string error = run_block(256, 64, [] { simt::named_barrier_sync<2>(128); });
  EXPECT_ERROR_HAS(error, "does not match the threads that take part");
}

// A count above them never completes: a deadlock report naming the barrier.
TEST(NamedBarrierEmulated, CountAboveTheParticipantsDeadlocks) {
  const std::string error = run_block(128, 64, [] {
    if (simt::warp() < 2) simt::named_barrier_sync<3>(128);
  });
  EXPECT_ERROR_HAS(error, "bar.sync 3 (64 of 128 arrived)");
}

TEST(NamedBarrierEmulated, ArrivalsWithDifferentCountsThrow) {
  const std::string error =
      run_block(128, 64, [] { simt::named_barrier_sync<1>(simt::warp() == 0 ? 64 : 128); });
  EXPECT_ERROR_HAS(error, "arrives with count");
}

}  // namespace
}  // namespace hetplan::kernels
