// mbarrier and bulk-copy primitives (sm_90) in the simt.h dialect: inline PTX on an sm_90a GPU
// (the Hopper object library, kernels/experimental/sm90a/), the emulator's model on the CPU
// (kernels/experimental/emulator/simt_bulk.cpp: the rules it checks are listed in
// emulator/simt_sm90.h), a trap elsewhere (other GPU targets never launch the kernels that use
// them).
//
//   mbarrier_init / _arrive / _arrive_expect_tx / _wait   a barrier of 8 bytes of shared memory
//   bulk_copy_g2s       cp.async.bulk global -> shared, completing its bytes on an mbarrier
//   bulk_reduce_add_f32 cp.reduce.async.bulk shared -> global, .add.f32, in bulk groups
//   bulk_commit, bulk_wait_read<N>                        the bulk groups of this thread
//   fence_proxy_async (simt_wgmma.h)   generic-proxy shared writes -> the bulk ops (async proxy)
//   named_barrier_sync, named_barrier_arrive   bar.sync / bar.arrive id, count (kernels/simt.h)
//   setmaxnreg<kRegisters, kIncrease>   setmaxnreg.{inc,dec}: a warpgroup's registers per thread
//
// The usual producer / consumer ring (PTX ISA "mbarrier"; the pattern CUTLASS's pipelines use):
// per stage a "full" barrier (count 1: the producer's arrive.expect_tx, then the copies'
// complete_tx) and an "empty" one (count: the consumers); round r of a stage waits on full with
// parity r & 1 and the producer on empty with parity (r & 1) ^ 1, which lets round 0 through.
// After mbarrier_init: fence_proxy_async (the copies complete on the barrier through the async
// proxy) and a block barrier (the other threads use it).
#pragma once

#include <cstdint>

#include "kernels/experimental/mbarrier_watchdog.h"
#include "kernels/experimental/simt_wgmma.h"
#include "kernels/simt.h"

#if defined(__CUDACC__) && defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define HETPLAN_BULK 1
#endif

namespace hetplan::kernels::simt {

#if defined(__CUDACC__) && !defined(HETPLAN_BULK)
[[noreturn]] HETPLAN_DEVICE void bulk_unavailable() {
  __trap();
  __builtin_unreachable();
}
#endif

// Sets up the barrier at `bar` (8-byte aligned shared memory): phase 0, `arrivals` per phase.
HETPLAN_DEVICE void mbarrier_init(uint64_t* bar, int arrivals) {
#if defined(HETPLAN_BULK)
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(arrivals)
               : "memory");
#elif defined(__CUDACC__)
  (void)bar, (void)arrivals;
  bulk_unavailable();
#else
  emu::mbarrier_init(bar, arrivals);
#endif
}

HETPLAN_DEVICE void mbarrier_arrive(uint64_t* bar) {
#if defined(HETPLAN_BULK)
  asm volatile(
      "{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(smem_u32(bar))
      : "memory");
#elif defined(__CUDACC__)
  (void)bar;
  bulk_unavailable();
#else
  emu::mbarrier_arrive(bar, 0);
#endif
}

// Raises the current phase's tx-count by `bytes` (what the bulk copies completing on it will
// bring), then arrives.
HETPLAN_DEVICE void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#if defined(HETPLAN_BULK)
  asm volatile(
      "{\n.reg .b64 state;\nmbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(
          smem_u32(bar)),
      "r"(bytes)
      : "memory");
#elif defined(__CUDACC__)
  (void)bar, (void)bytes;
  bulk_unavailable();
#else
  emu::mbarrier_arrive(bar, bytes);
#endif
}

#if defined(HETPLAN_BULK)
HETPLAN_DEVICE bool mbarrier_try_wait(uint32_t addr, int parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(addr), "r"(parity)
      : "memory");
  return done != 0;
}
#endif

// Returns once the phase of parity `parity` (0 or 1) has completed: the current phase or the one
// before it, whichever has that parity. The loop is C++ around one try_wait (no PTX labels,
// which would repeat where the function is inlined twice). On the GPU a wait that has not
// returned after more than 1 s ends the kernel with an error (mbarrier_watchdog.h).
HETPLAN_DEVICE void mbarrier_wait(uint64_t* bar, int parity) {
#if defined(HETPLAN_BULK)
  const uint32_t addr = smem_u32(bar);
#if HETPLAN_MBARRIER_WATCHDOG
  spin_with_watchdog([&] { return mbarrier_try_wait(addr, parity); },
                     [] { return globaltimer_ns(); },
                     [&](uint64_t waited_ns) { mbarrier_watchdog_fire(addr, parity, waited_ns); });
#else
  while (!mbarrier_try_wait(addr, parity)) {
  }
#endif
#elif defined(__CUDACC__)
  (void)bar, (void)parity;
  bulk_unavailable();
#else
  emu::mbarrier_wait_parity(bar, parity);
#endif
}

// `bytes` (a multiple of 16; both addresses 16-byte aligned) from global memory to shared
// memory; the bytes count towards the tx-count of `bar`'s current phase as they land.
HETPLAN_DEVICE void bulk_copy_g2s(void* smem_dst, const void* src, uint32_t bytes, uint64_t* bar) {
#if defined(HETPLAN_BULK)
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(smem_u32(smem_dst)),
      "l"(src), "r"(bytes), "r"(smem_u32(bar))
      : "memory");
#elif defined(__CUDACC__)
  (void)smem_dst, (void)src, (void)bytes, (void)bar;
  bulk_unavailable();
#else
  emu::bulk_copy_g2s(smem_dst, src, bytes, bar);
#endif
}

// dst[i] += src[i] for bytes / 4 floats (a multiple of 16 bytes; 16-byte aligned), atomic per
// element, asynchronously: `src` (shared) may be reused only after bulk_wait_read retires the
// group; the shared writes it reads need fence_proxy_async (and a barrier, when another thread
// wrote them) before the issue.
HETPLAN_DEVICE void bulk_reduce_add_f32(float* dst, const float* src, uint32_t bytes) {
#if defined(HETPLAN_BULK)
  asm volatile(
      "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst),
      "r"(smem_u32(src)), "r"(bytes)
      : "memory");
#elif defined(__CUDACC__)
  (void)dst, (void)src, (void)bytes;
  bulk_unavailable();
#else
  emu::bulk_reduce_add_f32(dst, src, bytes);
#endif
}

// Closes this thread's bulk group of the reduces issued since the last commit.
HETPLAN_DEVICE void bulk_commit() {
#if defined(HETPLAN_BULK)
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#elif defined(__CUDACC__)
  bulk_unavailable();
#else
  emu::bulk_commit();
#endif
}

// Waits until at most kPending of this thread's bulk groups still read their shared sources.
template <int kPending>
HETPLAN_DEVICE void bulk_wait_read() {
#if defined(HETPLAN_BULK)
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
#elif defined(__CUDACC__)
  bulk_unavailable();
#else
  emu::bulk_wait_read(kPending);
#endif
}

// setmaxnreg.inc / .dec (sm_90a): the executing warpgroup's registers per thread become
// kRegisters (24 .. 256, a multiple of 8); every warp of the warpgroup executes it. An .inc
// waits until the SM has the registers, which the .dec of other warpgroups give back.
template <int kRegisters, bool kIncrease>
HETPLAN_DEVICE void setmaxnreg() {
  static_assert(kRegisters >= 24 && kRegisters <= 256 && kRegisters % 8 == 0);
#if defined(HETPLAN_BULK)
  if constexpr (kIncrease)
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
  else
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
#elif defined(__CUDACC__)
  bulk_unavailable();
#else
  emu::setmaxnreg(kRegisters, kIncrease);
#endif
}

// A 4-byte shared-memory store of a float that the emulator records as a generic-proxy write
// (for the fence checks), as sts32 does for raw bits.
HETPLAN_DEVICE void sts_f32(float* p, float v) {
  uint32_t u;
  memcpy(&u, &v, 4);
  sts32(p, u);
}

// An 8-byte shared-memory store of two floats (8-byte aligned), recorded by the emulator as a
// generic-proxy write.
HETPLAN_DEVICE void sts_f32x2(float* p, float a, float b) {
#if defined(__CUDACC__)
  *reinterpret_cast<float2*>(p) = make_float2(a, b);
#else
  emu::check_shared(p, 8, 8);
  p[0] = a;
  p[1] = b;
  emu::note_generic_smem_write(p, 8);
#endif
}

}  // namespace hetplan::kernels::simt
