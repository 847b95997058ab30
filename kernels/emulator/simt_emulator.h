// A CPU emulator of CUDA's execution model, just wide enough to run this folder's kernels in CPU
// tests: every thread of a block is a fiber (ucontext) in one OS thread; __syncthreads, warp
// shuffles, ldmatrix, mma.sync, cp.async and wgmma (simt_wgmma.cpp) are emulated from the PTX
// ISA's definitions.
//
// Why: no GPU in CI (or on the development machine), and index math is where kernels go wrong.
// Under emulation a kernel runs its real code on small inputs and is compared with its reference;
// the emulator also reports what a GPU would only show as garbage: out-of-bounds or misaligned
// vector accesses to registered buffers, divergent warp collectives, barrier deadlocks, and
// shared memory read before a cp.async that fills it has been waited for (smem starts as NaN
// bytes and cp.async data lands only at cp.async.wait_group). By default threads take turns in
// index order, one step (up to the next barrier or collective) each; with `schedule_seed`, one
// random warp at a time runs up to its next __syncthreads, which exposes missing barriers.
// Not emulated: timing, memory-model subtleties beyond barriers, partial-warp collectives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace hetplan::kernels::emu {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

struct LaunchOptions {
  uint64_t schedule_seed = 0;  // 0: index order; else warps run alone between barriers, shuffled
  // cp.async data lands when issued instead of at the wait: exposes a buffer refilled while
  // another warp still reads it (a missing barrier), where the default exposes a missing wait.
  bool eager_async_copies = false;
  size_t stack_bytes = 256 * 1024;
};

// Runs `thread_body` as every thread of every block (blocks one after another). Throws
// std::runtime_error with the first problem found (a thread's exception, deadlock, divergence).
void launch(Dim3 grid, Dim3 block, size_t dynamic_smem_bytes,
            const std::function<void()>& thread_body, const LaunchOptions& options = {});

// The calling thread's coordinates; valid inside launch() only.
const Dim3& thread_idx();
const Dim3& block_idx();
const Dim3& block_dim();
const Dim3& grid_dim();
unsigned char* dynamic_smem();
void sync_threads();

// Warp collectives: the 32 lanes of the calling warp each pass a payload; each gets all 32.
constexpr int kPayloadBytes = 64;
struct Payload {
  alignas(8) unsigned char bytes[kPayloadBytes];
};
// `on_complete`, when given, runs once in the last lane to arrive, before any lane goes on (the
// whole warp is then at this collective: what it does is atomic with respect to the warp).
const Payload* warp_exchange(const Payload& mine, int op,
                             const std::function<void(int first_lane_linear)>& on_complete = {});
// The calling thread's linear index in its block, and a number that changes with every block
// run (per-thread state kept outside the emulator resets on it).
int linear_thread();
uint64_t block_serial();
// Offset of `p` in the block's shared memory: its shared-window address. The emulator's shared
// memory starts at address 0, so it is aligned to any power of two (the GPU's need not be).
uint32_t smem_offset(const void* p);
unsigned char* smem_at(uint32_t offset, size_t bytes);  // checked against the block's size

uint32_t shfl_xor(uint32_t v, int lane_mask);
uint32_t shfl_idx(uint32_t v, int src_lane);
// ldmatrix.sync.aligned.m8n8.x{n}.b16 (.trans): `row_address` is this lane's row of matrix lane/8.
void ldmatrix(uint32_t* out, int n_matrices, bool transpose, const void* row_address);
// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32: d = a * b + c.
void mma_m16n8k16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4],
                  bool bf16);

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
void note_generic_smem_write(const void* p, size_t bytes);
void fence_proxy_async();
void check_async_proxy_read(uint32_t offset, size_t bytes);
// The same check for another async-proxy access; `access` names it ("cp.reduce.async.bulk
// reads") in the error.
void check_async_proxy_access(uint32_t offset, size_t bytes, const char* access);
// wgmma.fence: a thread's wgmma needs one since the thread's last wgmma wait (or its start), the
// points after which it may have written the accumulator or A-fragment registers.
void wgmma_fence();

// mbarrier objects and bulk copies (sm_90; kernels/emulator/simt_bulk.cpp), from the PTX ISA
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
// Internal (between simt_emulator.cpp and simt_bulk.cpp): block the calling thread until the
// barrier at `offset` is past the phase of parity `parity`; the scheduler's test of that; a
// description for deadlock reports; checks at a thread's exit, at a block's end and on every
// generic-proxy shared-memory write.
void block_on_mbarrier(uint32_t offset, int parity);
// An arrive that completes a phase lets every other warp take its turn (the waiters it released
// included) before the arriving thread goes on, in either schedule: work a thread does after its
// release can no longer hide a release made too early.
void yield_after_release();
bool mbarrier_phase_done(uint32_t offset, int parity);
std::string mbarrier_describe(uint32_t offset);
void bulk_thread_exit_check();
void bulk_block_end_check();
void bulk_check_generic_write(uint32_t offset, size_t bytes);

// bar.sync id, count (a named barrier, id 1..15; 0 is __syncthreads): the calling thread waits
// until `count` threads (a positive multiple of 32) have arrived at barrier `id`. Checked: every
// arrival of one round gives the same count, and every round releases the same warps (a count
// smaller than the threads that take part releases them in separate rounds, which on the GPU
// orders nothing between those groups: the emulator throws at the first round that differs; a
// count larger than the threads that take part shows as a deadlock naming the barrier).
void named_barrier_sync(int id, int count);
// bar.arrive id, count: counts the calling thread towards the current round of barrier `id`
// (same count and round checks as bar.sync) without waiting for it: the producer side of a
// producer / consumer pair of named barriers. The arriving thread goes on only after every other
// warp has had its turn (the waiters it released included), as after an mbarrier arrive that
// completes a phase. A round still open when the block ends throws.
void named_barrier_arrive(int id, int count);
// setmaxnreg.{inc,dec}.sync.aligned.u32 (sm_90a) changes a warpgroup's registers per thread; a
// no-op here, with the rules checked: 24 .. 256 in steps of 8, the block whole warpgroups, every
// lane of the warp at the same instruction (a warp collective), the warps of one warpgroup asking
// for the same count, and the counts asked for by the block's warps together within the SM's
// 65536 registers (more makes an .inc wait forever on the GPU). The real bound is lower: the
// block's allocation at launch (ptxas's registers per thread x threads), which is not known here.
void setmaxnreg(int registers, bool increase);

// cp.async.cg.shared.global, 16 bytes; src_bytes 0 fills zeros (the source is not read).
void cp_async16(void* smem_dst, const void* global_src, int src_bytes);
void cp_async_commit();
void cp_async_wait(int groups_left_pending);

// Global buffers the kernels may access. While any are registered, the vector accesses checked
// below must fall inside one of them.
void register_global(const void* p, size_t bytes);
void unregister_globals();
void check_global(const void* p, size_t bytes, size_t alignment);
void check_shared(const void* p, size_t bytes, size_t alignment);

// Registers buffers for the scope's lifetime.
class GlobalScope {
 public:
  GlobalScope() = default;
  GlobalScope(const GlobalScope&) = delete;
  GlobalScope& operator=(const GlobalScope&) = delete;
  ~GlobalScope() { unregister_globals(); }
  template <class T>
  void add(const T* p, size_t count) {
    register_global(p, count * sizeof(T));
  }
};

}  // namespace hetplan::kernels::emu
