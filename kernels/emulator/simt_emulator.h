// A CPU emulator of CUDA's execution model, just wide enough to run this folder's kernels in CPU
// tests: every thread of a block is a fiber (ucontext) in one OS thread; __syncthreads, warp
// shuffles, ldmatrix, mma.sync and cp.async are emulated from the PTX ISA's definitions.
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
const Payload* warp_exchange(const Payload& mine, int op);

uint32_t shfl_xor(uint32_t v, int lane_mask);
uint32_t shfl_idx(uint32_t v, int src_lane);
// ldmatrix.sync.aligned.m8n8.x{n}.b16 (.trans): `row_address` is this lane's row of matrix lane/8.
void ldmatrix(uint32_t* out, int n_matrices, bool transpose, const void* row_address);
// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32: d = a * b + c.
void mma_m16n8k16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4],
                  bool bf16);

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
