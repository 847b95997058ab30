// The sm_90 layer of the CPU emulator (kernels/emulator/simt_emulator.h is the core it extends):
// wgmma, the generic and async proxies, setmaxnreg, mbarrier objects and bulk copies, for the
// experimental Hopper kernels of kernels/experimental/. Defined in simt_wgmma.cpp (wgmma,
// setmaxnreg), simt_proxy.cpp (proxies) and simt_bulk.cpp (mbarrier, bulk copies) beside this
// file; each keeps its state per block and hooks into the core as an emu::Extension.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "kernels/emulator/simt_emulator.h"

namespace hetplan::kernels::emu {

// wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16} (sm_90a), modelled per warp: warp w of
// a warpgroup owns rows 16 (w % 4) .. + 15 of the 64, so a warp's result needs only its own rows
// of A and all of B. `d` is this thread's N / 2 accumulators; A comes from `a_regs` (4 registers,
// mma.sync's A fragment layout) or, when null, from the shared-memory descriptor `a_desc`; B from
// `b_desc`. Descriptors: 128-byte swizzle only (the kernels use no other), base offset 0. The
// product lands in `d` at the wgmma_wait that retires its group; until then `d` reads as NaN, and
// shared memory is read at that wait (a buffer overwritten before it shows).
void wgmma_async(float* d, int n, const uint32_t* a_regs, uint64_t a_desc, uint64_t b_desc,
                 bool scale_d, bool trans_a, bool trans_b, bool bf16);
void wgmma_commit();
void wgmma_wait(int groups_left_pending);
// Test hook: called at every wgmma.mma_async a warp issues (once, by its lane 0) with the warp's
// index in the block, in the order of issue; an empty function (the default) calls nothing.
// Lets a test check the order in which warpgroups issue (the ping-pong forward's turns).
void set_wgmma_issue_hook(std::function<void(int warp)> hook);

// Generic and async proxies (PTX ISA, memory consistency model): shared memory written by
// ordinary stores or cp.async (the generic proxy) is visible to wgmma (the async proxy) only
// after the writing thread's fence.proxy.async (and a barrier, when another thread reads). The
// emulator records such writes per byte (sts32 and cp.async land here; plain C++ stores do not),
// and a wgmma that reads a byte still unfenced throws.
void fence_proxy_async();
void check_async_proxy_read(uint32_t offset, size_t bytes);
// The same check for another async-proxy access; `access` names it ("cp.reduce.async.bulk
// reads") in the error.
void check_async_proxy_access(uint32_t offset, size_t bytes, const char* access);
// wgmma.fence: a thread's wgmma needs one since the thread's last wgmma wait (or its start), the
// points after which it may have written the accumulator or A-fragment registers.
void wgmma_fence();

// mbarrier objects and bulk copies (sm_90; simt_bulk.cpp), from the PTX ISA
// ("Parallel Synchronization and Communication Instructions: mbarrier", "cp.async.bulk",
// "cp.reduce.async.bulk"). A barrier is 8 bytes of shared memory (8-byte aligned) with a phase,
// the arrivals still pending in it (the count given at init) and a tx-count; a phase completes
// when both reach zero. What the model checks, each with an error naming the barrier's offset:
//   - a bulk copy's destination reads as NaN bytes from its issue until a thread's wait observes
//     the completion of the phase it completed into (a missing wait, or a refill while a reader
//     is still at it, shows as NaN);
//   - a phase whose arrivals are all in with the tx-count below zero (copies brought more bytes
//     than arrive.expect_tx announced) throws, as does a tx-count beyond +-(2^20 - 1), an arrival
//     more than the count, and a wait that returns a phase the thread observed already (stale
//     parity) or skips one; a phase that never completes shows as a deadlock naming the barrier's
//     pending arrivals and tx-count;
//   - mbarrier.init is a generic-proxy write: a bulk copy completing on a barrier whose init the
//     initialising thread has not followed with fence.proxy.async throws;
//   - a bulk reduce reads its shared-memory source at the cp.async.bulk.wait_group(.read) that
//     retires its group, not at issue; a generic write into a source still being read throws, as
//     does a source with unfenced generic-proxy writes at issue and a thread that exits with a
//     bulk group never waited for;
//   - sizes must be multiples of 16 bytes and addresses 16-byte aligned.
// A thread waiting on a barrier blocks (other threads run) until the phase of the wanted parity
// completes. Blocks run one at a time, so a reduce into global memory from several blocks is
// race-free here; on the GPU it is atomic per element.
void mbarrier_init(const void* bar, int arrivals);
void mbarrier_arrive(const void* bar, uint32_t expect_tx_bytes);  // 0: plain arrive
void mbarrier_wait_parity(const void* bar, int parity);
void bulk_copy_g2s(void* smem_dst, const void* global_src, uint32_t bytes, const void* bar);
void bulk_reduce_add_f32(float* global_dst, const void* smem_src, uint32_t bytes);
void bulk_commit();
void bulk_wait_read(int groups_left_pending);

// setmaxnreg.{inc,dec}.sync.aligned.u32 (sm_90a) changes a warpgroup's registers per thread; a
// no-op here, with the rules checked: 24 .. 256 in steps of 8, the block whole warpgroups, every
// lane of the warp at the same instruction (a warp collective), the warps of one warpgroup asking
// for the same count, and the counts asked for by the block's warps together within the SM's
// 65536 registers (more makes an .inc wait forever on the GPU). The real bound is lower: the
// block's allocation at launch (ptxas's registers per thread x threads), which is not known here.
void setmaxnreg(int registers, bool increase);

}  // namespace hetplan::kernels::emu
