// A CPU emulator of CUDA's execution model, just wide enough to run this folder's kernels in CPU
// tests: every thread of a block is a fiber (ucontext) in one OS thread; __syncthreads, warp
// shuffles, ldmatrix, mma.sync, cp.async and named barriers are emulated from the PTX ISA's
// definitions. Hopper's wgmma, mbarrier objects and bulk copies are an extension of this core
// (kernels/experimental/emulator/simt_sm90.h), built with HETPLAN_EXPERIMENTAL_KERNELS.
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
// warp has had its turn (the waiters it released included; yield_after_release). A round still
// open when the block ends throws.
void named_barrier_arrive(int id, int count);
// cp.async.cg.shared.global, 16 bytes; src_bytes 0 fills zeros (the source is not read).
void cp_async16(void* smem_dst, const void* global_src, int src_bytes);
void cp_async_commit();
void cp_async_wait(int groups_left_pending);

// An ordinary (generic-proxy) shared-memory store of `bytes` at `p` by the calling thread: the
// kernels' sts32 and sts16 report theirs here (plain C++ stores do not), as cp.async does when
// its data lands. Checked against the block's shared memory; extensions see every one.
void note_generic_smem_write(const void* p, size_t bytes);

// For extensions of the emulator (kernels/experimental/emulator/): they keep their own state
// per block (reset when block_serial() changes) and meet the core only through what follows.
class Extension {
 public:
  virtual ~Extension() = default;
  // A generic-proxy shared-memory write by the calling thread (note_generic_smem_write).
  virtual void generic_smem_write(uint32_t /*offset*/, size_t /*bytes*/) {}
  // The calling thread's body returned; throws to report what the thread left undone.
  virtual void thread_exit() {}
  // Every thread of the block is done; throws to report what the block left undone.
  virtual void block_end() {}
};
// Adds `e`, which must outlive every launch (a namespace-scope object registering itself).
void add_extension(Extension* e);
// Blocks the calling thread until `ready()` holds, tested whenever the thread would run (an
// mbarrier wait); `waiting()` says what it waits for in a deadlock report.
void block_until(std::function<bool()> ready, std::function<std::string()> waiting);
// The calling thread goes on only after every other warp has had its turn of the current pass,
// in either schedule: used after an arrival that releases other threads, so that work the
// arriving thread does next cannot hide a release made too early.
void yield_after_release();

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
