// A bounded spin for mbarrier waits on the GPU (simt_bulk.h's mbarrier_wait): a phase the
// hardware never completes (an expect_tx too large, an arrival missing) would otherwise hang the
// kernel until the calling step's time limit. After kMbarrierWatchdogSpinsPerCheck failed
// try_waits the wait reads %globaltimer (nanoseconds) on every further failure, and once
// kMbarrierWatchdogLimitNs have passed since its first reading it gives up: the kernel ends with
// an error. The fast path costs a counter and a compare per failed try_wait (a wait whose first
// try_wait succeeds costs nothing).
//
// Sizing: a failed try_wait takes at least its shared-memory round trip (tens of clocks, ~20 ns
// at 1.8 GHz; the PTX ISA lets the hardware suspend the thread longer, up to a system-dependent
// limit), so the clock is first read after >= ~80 us, which no wait of ours that completes comes
// near (a whole key tile of the attention backward is ~10 us). The limit is counted from that
// reading, so a wait gives up after more than 1 s: 10^5 tiles' time, and well below the 60 s a
// GPU step may take. It fires spuriously where the clock runs while the kernel does not: a
// debugger stopped at a breakpoint (build with -DHETPLAN_MBARRIER_WATCHDOG=0 there).
//
// HETPLAN_MBARRIER_WATCHDOG, per translation unit:
//   0   the plain unbounded loop.
//   1   (default) give up by a store to address 0: the host sees "an illegal memory access was
//       encountered" (cudaErrorIllegalAddress) at the next synchronisation, with no message. In
//       a kernel with wgmma neither a print nor a trap is possible without slowing it: any call
//       (printf is a call of vprintf) makes ptxas serialise every wgmma of the kernel (C7510,
//       "wgmma pipeline crossing function boundary"), and a trap in the warp-specialised
//       backward made it serialise them for lack of registers (C7512) and spill ~900 bytes.
//   2   print the barrier's shared address, the parity, the block and the thread, then trap (an
//       out-of-line call): for kernels without wgmma (kernels/experimental/sm90a/bulk_selftest.cu),
//       or a debugging build of the others (their timings then mean nothing).
// The emulator (CPU) never uses this: it reports a phase that never completes as a deadlock.
#pragma once

#include <cstdint>
#include <cstdio>

#include "kernels/simt.h"

#ifndef HETPLAN_MBARRIER_WATCHDOG
#define HETPLAN_MBARRIER_WATCHDOG 1
#endif

namespace hetplan::kernels::simt {

constexpr uint32_t kMbarrierWatchdogSpinsPerCheck = 4096;
constexpr uint64_t kMbarrierWatchdogLimitNs = 1'000'000'000;

// Spins until try_wait() returns true. The first kMbarrierWatchdogSpinsPerCheck failures cost a
// counter and a compare each; after them clock() (ns) is read on every failure, and give_up(ns
// since the first reading) is called once kMbarrierWatchdogLimitNs have passed (on the GPU it
// does not return). A clock that goes backwards (the driver may set %globaltimer) starts the
// count again.
template <class TryWait, class Clock, class GiveUp>
HETPLAN_HD void spin_with_watchdog(TryWait try_wait, Clock clock, GiveUp give_up) {
  for (uint32_t spins = 0; !try_wait();) {
    if (++spins < kMbarrierWatchdogSpinsPerCheck) continue;
    uint64_t since_ns = clock();
    while (!try_wait()) {
      const uint64_t now_ns = clock();
      if (now_ns < since_ns) since_ns = now_ns;
      if (now_ns - since_ns >= kMbarrierWatchdogLimitNs) give_up(now_ns - since_ns);
    }
    return;
  }
}

#if defined(__CUDACC__) && defined(__CUDA_ARCH__)
HETPLAN_DEVICE uint64_t globaltimer_ns() {
  uint64_t ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

#if HETPLAN_MBARRIER_WATCHDOG == 2
// Out of line, so that the printf's argument buffer stays out of the waiting loop. One line per
// thread that gives up, until the first trap ends the grid.
[[noreturn]] __device__ __noinline__ inline void mbarrier_watchdog_fire(uint32_t bar_addr,
                                                                        int parity,
                                                                        uint64_t waited_ns) {
  printf(
      "hetplan: mbarrier wait gave up after more than %.2f s (HETPLAN_MBARRIER_WATCHDOG): "
      "barrier at shared address 0x%x, parity %d, block (%d,%d,%d), thread %d\n",
      static_cast<double>(waited_ns) * 1e-9, bar_addr, parity, static_cast<int>(blockIdx.x),
      static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.z), static_cast<int>(threadIdx.x));
  __trap();
  __builtin_unreachable();
}
#else
// Address 0 is never mapped (Linux keeps the first 64 KB of a process unmapped, and the GPU's
// view of host memory follows it), so the store faults and the context ends with an error.
HETPLAN_DEVICE void mbarrier_watchdog_fire(uint32_t bar_addr, int parity, uint64_t) {
  asm volatile("st.global.u32 [%0], %1;\n" ::"l"(uint64_t{0}), "r"(bar_addr | parity) : "memory");
}
#endif
#endif

}  // namespace hetplan::kernels::simt
