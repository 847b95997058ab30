#include "kernels/emulator/simt_emulator.h"

#include <ucontext.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/reference/numeric.h"

namespace hetplan::kernels::emu {
namespace {

// kWaiting: in block_until, until its condition holds. kReleased: the thread released others
// (a barrier's last arrival) and waits until every other warp has had its turn of the current
// pass (yield_after_release).
enum class State { kReady, kBlockBarrier, kNamedBarrier, kWarp, kWaiting, kReleased, kDone };

struct PendingCopy {
  unsigned char* dst;
  unsigned char data[16];
  int group;  // -1 until committed
};

struct Fiber {
  ucontext_t context{};
  std::unique_ptr<unsigned char[]> stack;
  State state = State::kReady;
  Dim3 tid;
  int linear = 0;
  std::vector<PendingCopy> copies;
  int next_group = 0;
  int warp_op = -1;
  std::function<bool()> ready;  // while kWaiting: the condition waited for, and what it is
  std::function<std::string()> waiting;
  int named_id = 0;  // while kNamedBarrier: the barrier
};

struct WarpState {
  int arrived = 0;
  int op = -1;
  unsigned generation = 0;
  Payload slots[2][32];
};

// A named barrier (bar.sync id, count): the current round's count, arrivals and the warps
// arrived (bit per warp), and the warps the first completed round released.
struct NamedBarrier {
  int count = 0;
  int arrived = 0;
  uint32_t warps = 0;
  uint32_t first_round_warps = 0;
  int rounds = 0;
};

struct Run {
  ucontext_t scheduler{};
  std::vector<Fiber> fibers;
  std::vector<WarpState> warps;
  NamedBarrier named[16];
  int current = 0;
  int at_barrier = 0;
  int done = 0;
  std::vector<unsigned char> smem;
  Dim3 block_idx, block_dim, grid_dim;
  const std::function<void()>* body = nullptr;
  bool eager_copies = false;
  std::string error;
};

Run* g_run = nullptr;
uint64_t g_block_serial = 0;
std::vector<std::pair<uintptr_t, uintptr_t>> g_globals;

std::vector<Extension*>& extensions() {
  static std::vector<Extension*> all;
  return all;
}

Run& run() {
  if (!g_run) throw std::logic_error("emu: called outside emu::launch");
  return *g_run;
}
Fiber& me() { return run().fibers[static_cast<size_t>(run().current)]; }

void yield() {
  Run& r = run();
  swapcontext(&r.fibers[static_cast<size_t>(r.current)].context, &r.scheduler);
}

void release_block_barrier_if_complete(Run& r) {
  const int live = static_cast<int>(r.fibers.size()) - r.done;
  if (r.at_barrier == 0 || r.at_barrier < live) return;
  for (Fiber& f : r.fibers)
    if (f.state == State::kBlockBarrier) f.state = State::kReady;
  r.at_barrier = 0;
}

void mark_generic_write(const Run& r, const unsigned char* p, size_t bytes) {
  const auto offset = static_cast<uint32_t>(p - r.smem.data());
  for (Extension* e : extensions()) e->generic_smem_write(offset, bytes);
}

void apply_copies(Fiber& f, int newest_group_to_apply) {
  auto keep = std::stable_partition(f.copies.begin(), f.copies.end(), [&](const PendingCopy& c) {
    return c.group < 0 || c.group > newest_group_to_apply;
  });
  for (auto it = keep; it != f.copies.end(); ++it) {
    std::memcpy(it->dst, it->data, 16);
    mark_generic_write(run(), it->dst, 16);  // cp.async writes through the generic proxy
  }
  f.copies.erase(keep, f.copies.end());
}

void fiber_main() {
  Run& r = run();
  Fiber& f = r.fibers[static_cast<size_t>(r.current)];
  try {
    (*r.body)();
    if (!f.copies.empty())
      throw std::runtime_error("thread exited with cp.async copies never waited for");
    for (Extension* e : extensions()) e->thread_exit();
  } catch (const std::exception& e) {
    if (r.error.empty()) r.error = e.what();
  }
  f.state = State::kDone;
  ++r.done;
  release_block_barrier_if_complete(r);
  setcontext(&r.scheduler);
}

std::string describe(const Run& r) {
  std::string s;
  // Threads in block_until (at an mbarrier) first: one usually says why the others wait at
  // __syncthreads.
  std::vector<const Fiber*> order;
  for (const Fiber& f : r.fibers)
    if (f.state == State::kWaiting) order.push_back(&f);
  for (const Fiber& f : r.fibers)
    if (f.state != State::kWaiting) order.push_back(&f);
  for (const Fiber* fp : order) {
    const Fiber& f = *fp;
    if (f.state == State::kDone) continue;
    s += " t" + std::to_string(f.linear) +
         (f.state == State::kBlockBarrier ? ":syncthreads"
          : f.state == State::kNamedBarrier
              ? ":bar.sync " + std::to_string(f.named_id) + " (" +
                    std::to_string(r.named[f.named_id].arrived) + " of " +
                    std::to_string(r.named[f.named_id].count) + " arrived)"
          : f.state == State::kWaiting ? ":" + f.waiting()
                                       : ":warp-op" + std::to_string(f.warp_op));
    if (s.size() > 300) return s + " ...";
  }
  return s;
}

// Whether fiber i can run now; a thread in block_until becomes ready when its condition holds
// (tested just before it would run, so nothing changes in between).
bool runnable(Run& r, int i) {
  Fiber& f = r.fibers[static_cast<size_t>(i)];
  if (f.state == State::kWaiting && f.ready()) f.state = State::kReady;
  return f.state == State::kReady;
}

void run_block(Run& r, size_t stack_bytes, std::mt19937_64* shuffle) {
  const int n = static_cast<int>(r.fibers.size());
  for (int i = 0; i < n; ++i) {
    Fiber& f = r.fibers[static_cast<size_t>(i)];
    f.state = State::kReady;
    f.copies.clear();
    f.next_group = 0;
    f.warp_op = -1;
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack.get();
    f.context.uc_stack.ss_size = stack_bytes;
    f.context.uc_link = nullptr;
    makecontext(&f.context, fiber_main, 0);
  }
  for (WarpState& w : r.warps) w = WarpState{};
  for (NamedBarrier& b : r.named) b = NamedBarrier{};
  r.at_barrier = 0;
  r.done = 0;
  auto run_fiber = [&](int i) {
    r.current = i;
    swapcontext(&r.scheduler, &r.fibers[static_cast<size_t>(i)].context);
  };
  const int warps = (n + 31) / 32;
  while (r.done < n) {
    bool ran = false;
    // Threads that completed a phase last pass go on now: in index order every other thread has
    // had a step since; shuffled, their warps come last in this pass.
    std::vector<char> released(static_cast<size_t>(warps), 0);
    for (Fiber& f : r.fibers)
      if (f.state == State::kReleased) {
        f.state = State::kReady;
        released[static_cast<size_t>(f.linear / 32)] = 1;
      }
    if (!shuffle) {
      // Index order, one step (up to the next barrier or collective) per thread per pass.
      for (int i = 0; i < n && r.error.empty(); ++i) {
        if (!runnable(r, i)) continue;
        run_fiber(i);
        ran = true;
      }
    } else {
      // A random warp runs alone until it reaches a block barrier (or ends), then another: a
      // warp reading what another warp writes without a barrier in between sees stale data.
      std::vector<int> order(static_cast<size_t>(warps));
      for (int w = 0; w < warps; ++w) order[static_cast<size_t>(w)] = w;
      std::shuffle(order.begin(), order.end(), *shuffle);
      std::stable_partition(order.begin(), order.end(),
                            [&](int w) { return released[static_cast<size_t>(w)] == 0; });
      for (int w : order) {
        for (bool progress = true; progress && r.error.empty();) {
          progress = false;
          for (int i = w * 32; i < std::min(n, w * 32 + 32) && r.error.empty(); ++i) {
            if (!runnable(r, i)) continue;
            run_fiber(i);
            progress = ran = true;
          }
        }
      }
    }
    if (!r.error.empty()) return;
    if (!ran) {
      r.error = "deadlock: no thread can run; waiting:" + describe(r);
      return;
    }
  }
}

// A round of a named barrier still open when the block ends: arrivals (bar.arrive) that no
// bar.sync consumed, which on the GPU would be counted towards a round nobody waits for.
void named_barrier_block_end_check(const Run& r) {
  for (int id = 1; id < 16; ++id)
    if (r.named[id].arrived != 0)
      throw std::runtime_error("named barrier " + std::to_string(id) + ": the block ends with " +
                               std::to_string(r.named[id].arrived) + " of " +
                               std::to_string(r.named[id].count) + " arrivals in an open round");
}

}  // namespace

void launch(Dim3 grid, Dim3 block, size_t dynamic_smem_bytes,
            const std::function<void()>& thread_body, const LaunchOptions& options) {
  if (g_run) throw std::logic_error("emu::launch: nested launch");
  const unsigned n = block.x * block.y * block.z;
  if (n == 0 || n > 1024) throw std::invalid_argument("emu::launch: block size must be 1..1024");
  if (grid.x == 0 || grid.y == 0 || grid.z == 0)
    throw std::invalid_argument("emu::launch: empty grid");
  Run r;
  r.body = &thread_body;
  r.eager_copies = options.eager_async_copies;
  r.block_dim = block;
  r.grid_dim = grid;
  r.fibers.resize(n);
  r.warps.resize((n + 31) / 32);
  r.smem.resize(dynamic_smem_bytes);
  for (unsigned i = 0; i < n; ++i) {
    Fiber& f = r.fibers[i];
    f.stack = std::make_unique<unsigned char[]>(options.stack_bytes);
    f.linear = static_cast<int>(i);
    f.tid = Dim3{i % block.x, (i / block.x) % block.y, i / (block.x * block.y)};
  }
  std::mt19937_64 rng(options.schedule_seed);
  g_run = &r;
  for (unsigned bz = 0; bz < grid.z && r.error.empty(); ++bz)
    for (unsigned by = 0; by < grid.y && r.error.empty(); ++by)
      for (unsigned bx = 0; bx < grid.x && r.error.empty(); ++bx) {
        r.block_idx = Dim3{bx, by, bz};
        ++g_block_serial;
        std::fill(r.smem.begin(), r.smem.end(), static_cast<unsigned char>(0xff));  // NaN bytes
        run_block(r, options.stack_bytes, options.schedule_seed ? &rng : nullptr);
        if (r.error.empty()) {
          try {
            named_barrier_block_end_check(r);
            for (Extension* e : extensions()) e->block_end();
          } catch (const std::exception& e) {
            r.error = e.what();
          }
        }
        if (!r.error.empty())
          r.error = "block (" + std::to_string(bx) + "," + std::to_string(by) + "," +
                    std::to_string(bz) + "): " + r.error;
      }
  g_run = nullptr;
  if (!r.error.empty()) throw std::runtime_error("emu: " + r.error);
}

const Dim3& thread_idx() { return me().tid; }
int linear_thread() { return me().linear; }
uint64_t block_serial() { return g_block_serial; }
uint32_t smem_offset(const void* p) {
  const Run& r = run();
  const auto b = reinterpret_cast<uintptr_t>(p), lo = reinterpret_cast<uintptr_t>(r.smem.data());
  if (b < lo || b > lo + r.smem.size()) throw std::runtime_error("not a shared-memory address");
  return static_cast<uint32_t>(b - lo);
}
unsigned char* smem_at(uint32_t offset, size_t bytes) {
  Run& r = run();
  if (size_t{offset} + bytes > r.smem.size())
    throw std::runtime_error("out-of-bounds shared-memory access at offset " +
                             std::to_string(offset));
  return r.smem.data() + offset;
}
const Dim3& block_idx() { return run().block_idx; }
const Dim3& block_dim() { return run().block_dim; }
const Dim3& grid_dim() { return run().grid_dim; }
unsigned char* dynamic_smem() { return run().smem.data(); }

void sync_threads() {
  Run& r = run();
  Fiber& f = me();
  f.state = State::kBlockBarrier;
  ++r.at_barrier;
  release_block_barrier_if_complete(r);
  if (f.state != State::kReady) yield();
}

namespace {
std::string warp_list(uint32_t warps) {
  std::string s;
  for (int w = 0; w < 32; ++w)
    if (warps & (uint32_t{1} << w)) s += (s.empty() ? "" : ",") + std::to_string(w);
  return "{" + s + "}";
}
}  // namespace

namespace {
// One arrival at named barrier `id` (bar.sync when `wait`, bar.arrive otherwise); completes the
// round when it is the count-th.
void named_barrier_arrival(int id, int count, bool wait) {
  Run& r = run();
  Fiber& f = me();
  const int n = static_cast<int>(r.fibers.size());
  const std::string op = wait ? "bar.sync" : "bar.arrive";
  if (id < 1 || id > 15)
    throw std::runtime_error(op + ": named barrier id " + std::to_string(id) +
                             " outside 1 .. 15 (0 is __syncthreads)");
  if (count <= 0 || count % 32 != 0 || count > n)
    throw std::runtime_error(op + " " + std::to_string(id) + ": thread count " +
                             std::to_string(count) +
                             " is not a positive multiple of 32 within the block");
  NamedBarrier& b = r.named[id];
  if (b.arrived == 0) {
    b.count = count;
    b.warps = 0;
  } else if (b.count != count) {
    throw std::runtime_error(op + " " + std::to_string(id) + ": thread " +
                             std::to_string(f.linear) + " arrives with count " +
                             std::to_string(count) + " while this round's arrivals gave " +
                             std::to_string(b.count));
  }
  ++b.arrived;
  b.warps |= uint32_t{1} << (f.linear / 32);
  if (wait) {
    f.state = State::kNamedBarrier;
    f.named_id = id;
  }
  if (b.arrived < b.count) {
    // bar.arrive goes on, but only after every other warp has had its turn: work the arriving
    // thread does after its arrive then cannot hide an order the barrier does not give.
    if (wait)
      yield();
    else
      yield_after_release();
    return;
  }
  if (b.rounds > 0 && b.warps != b.first_round_warps)
    throw std::runtime_error(
        op + " " + std::to_string(id) + ": round " + std::to_string(b.rounds) + " released warps " +
        warp_list(b.warps) + ", round 0 warps " + warp_list(b.first_round_warps) + "; the count " +
        std::to_string(b.count) + " does not match the threads that take part");
  if (b.rounds == 0) b.first_round_warps = b.warps;
  ++b.rounds;
  b.arrived = 0;
  for (Fiber& other : r.fibers)
    if (other.state == State::kNamedBarrier && other.named_id == id) other.state = State::kReady;
  if (!wait) yield_after_release();  // the released warps run first
}
}  // namespace

void named_barrier_sync(int id, int count) { named_barrier_arrival(id, count, true); }
void named_barrier_arrive(int id, int count) { named_barrier_arrival(id, count, false); }

const Payload* warp_exchange(const Payload& mine, int op,
                             const std::function<void(int first_lane_linear)>& on_complete) {
  Run& r = run();
  Fiber& f = me();
  WarpState& w = r.warps[static_cast<size_t>(f.linear / 32)];
  const int lanes = std::min(32, static_cast<int>(r.fibers.size()) - f.linear / 32 * 32);
  if (lanes != 32) throw std::runtime_error("warp collective in a partial warp");
  if (w.arrived == 0) {
    w.op = op;
  } else if (w.op != op) {
    throw std::runtime_error("divergent warp: lane " + std::to_string(f.linear % 32) + " at op " +
                             std::to_string(op) + " while others are at op " +
                             std::to_string(w.op));
  }
  const unsigned generation = w.generation;
  w.slots[generation & 1][f.linear % 32] = mine;
  f.state = State::kWarp;
  f.warp_op = op;
  if (++w.arrived == 32) {
    if (on_complete) on_complete(f.linear / 32 * 32);
    for (int l = 0; l < 32; ++l)
      r.fibers[static_cast<size_t>(f.linear / 32 * 32 + l)].state = State::kReady;
    w.arrived = 0;
    ++w.generation;
  } else {
    yield();
  }
  return w.slots[generation & 1];
}

namespace {
enum Op { kShflXor = 1, kShflIdx, kLdmatrix, kMma };

template <class T>
Payload pack(const T& v) {
  static_assert(sizeof(T) <= kPayloadBytes);
  Payload p{};
  std::memcpy(p.bytes, &v, sizeof(T));
  return p;
}
template <class T>
T unpack(const Payload& p) {
  T v;
  std::memcpy(&v, p.bytes, sizeof(T));
  return v;
}
uint16_t element16(const void* row, int col) {
  uint16_t v;
  std::memcpy(&v, static_cast<const unsigned char*>(row) + 2 * col, 2);
  return v;
}
}  // namespace

uint32_t shfl_xor(uint32_t v, int lane_mask) {
  const int lane = me().linear % 32;
  return unpack<uint32_t>(
      warp_exchange(pack(v), kShflXor * 100 + lane_mask)[(lane ^ lane_mask) & 31]);
}

uint32_t shfl_idx(uint32_t v, int src_lane) {
  return unpack<uint32_t>(warp_exchange(pack(v), kShflIdx)[src_lane & 31]);
}

void ldmatrix(uint32_t* out, int n_matrices, bool transpose, const void* row_address) {
  const int lane = me().linear % 32;
  if (lane < n_matrices * 8) check_shared(row_address, 16, 16);
  const Payload* all =
      warp_exchange(pack(row_address), kLdmatrix * 100 + n_matrices * 2 + transpose);
  const int g = lane / 4, q = lane % 4;
  for (int m = 0; m < n_matrices; ++m) {
    uint16_t lo, hi;
    if (!transpose) {
      const void* row = unpack<const void*>(all[m * 8 + g]);
      lo = element16(row, 2 * q);
      hi = element16(row, 2 * q + 1);
    } else {
      lo = element16(unpack<const void*>(all[m * 8 + 2 * q]), g);
      hi = element16(unpack<const void*>(all[m * 8 + 2 * q + 1]), g);
    }
    out[m] = uint32_t{lo} | (uint32_t{hi} << 16);
  }
}

void mma_m16n8k16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4],
                  bool bf16) {
  struct Frag {
    uint32_t a[4], b[2];
    float c[4];
  } mine{};
  std::memcpy(mine.a, a, sizeof mine.a);
  std::memcpy(mine.b, b, sizeof mine.b);
  std::memcpy(mine.c, c, sizeof mine.c);
  const int lane = me().linear % 32;
  const Payload* all = warp_exchange(pack(mine), kMma * 100 + bf16);
  auto value = [&](uint32_t reg, int half) {
    const uint16_t bits = static_cast<uint16_t>(half ? reg >> 16 : reg & 0xffffu);
    return bf16 ? bf16_bits_to_float(bits) : fp16_bits_to_float(bits);
  };
  float A[16][16], B[16][8];
  for (int t = 0; t < 32; ++t) {
    const Frag f = unpack<Frag>(all[t]);
    const int g = t / 4, q = t % 4;
    for (int h = 0; h < 2; ++h) {
      A[g][2 * q + h] = value(f.a[0], h);
      A[g + 8][2 * q + h] = value(f.a[1], h);
      A[g][2 * q + 8 + h] = value(f.a[2], h);
      A[g + 8][2 * q + 8 + h] = value(f.a[3], h);
      B[2 * q + h][g] = value(f.b[0], h);
      B[2 * q + 8 + h][g] = value(f.b[1], h);
    }
  }
  const int g = lane / 4, q = lane % 4;
  const int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * q, 2 * q + 1, 2 * q, 2 * q + 1};
  float out[4];
  for (int i = 0; i < 4; ++i) {
    double acc = c[i];
    for (int k = 0; k < 16; ++k) acc += double{A[rows[i]][k]} * B[k][cols[i]];
    out[i] = static_cast<float>(acc);
  }
  std::memcpy(d, out, sizeof out);
}

void cp_async16(void* smem_dst, const void* global_src, int src_bytes) {
  check_shared(smem_dst, 16, 16);
  PendingCopy c{};
  c.dst = static_cast<unsigned char*>(smem_dst);
  c.group = -1;
  if (src_bytes > 0) {
    check_global(global_src, static_cast<size_t>(src_bytes), 16);
    std::memcpy(c.data, global_src, static_cast<size_t>(src_bytes));
  }
  if (run().eager_copies) {
    std::memcpy(c.dst, c.data, 16);
    mark_generic_write(run(), c.dst, 16);
    return;
  }
  me().copies.push_back(c);
}

void cp_async_commit() {
  Fiber& f = me();
  for (PendingCopy& c : f.copies)
    if (c.group < 0) c.group = f.next_group;
  ++f.next_group;
}

void cp_async_wait(int groups_left_pending) {
  Fiber& f = me();
  apply_copies(f, f.next_group - 1 - groups_left_pending);
}

void note_generic_smem_write(const void* p, size_t bytes) {
  check_shared(p, bytes, 1);
  mark_generic_write(run(), static_cast<const unsigned char*>(p), bytes);
}

void add_extension(Extension* e) { extensions().push_back(e); }

void yield_after_release() {
  me().state = State::kReleased;
  yield();
}

void block_until(std::function<bool()> ready, std::function<std::string()> waiting) {
  Fiber& f = me();
  f.state = State::kWaiting;
  f.ready = std::move(ready);
  f.waiting = std::move(waiting);
  yield();
  f.ready = nullptr;
  f.waiting = nullptr;
}

void register_global(const void* p, size_t bytes) {
  const auto b = reinterpret_cast<uintptr_t>(p);
  g_globals.emplace_back(b, b + bytes);
}
void unregister_globals() { g_globals.clear(); }

void check_global(const void* p, size_t bytes, size_t alignment) {
  const auto b = reinterpret_cast<uintptr_t>(p);
  if (b % alignment != 0)
    throw std::runtime_error("misaligned " + std::to_string(bytes) + "-byte global access");
  if (g_globals.empty()) return;
  for (const auto& [lo, hi] : g_globals)
    if (b >= lo && b + bytes <= hi) return;
  throw std::runtime_error("out-of-bounds " + std::to_string(bytes) + "-byte global access");
}

void check_shared(const void* p, size_t bytes, size_t alignment) {
  const Run& r = run();
  const auto b = reinterpret_cast<uintptr_t>(p);
  const auto lo = reinterpret_cast<uintptr_t>(r.smem.data());
  if (b % alignment != 0) throw std::runtime_error("misaligned shared-memory access");
  if (b < lo || b + bytes > lo + r.smem.size())
    throw std::runtime_error("out-of-bounds shared-memory access at offset " +
                             std::to_string(static_cast<long long>(b - lo)));
}

}  // namespace hetplan::kernels::emu
