// mbarrier objects, cp.async.bulk (global -> shared, completing on an mbarrier) and
// cp.reduce.async.bulk (.add.f32, shared -> global, bulk groups) under the emulator; the rules
// are listed in simt_sm90.h. Definitions from the PTX ISA: an mbarrier tracks its current
// phase, the arrivals pending in it (reset to the count given at init when a phase completes)
// and a tx-count that arrive.expect_tx raises and complete_tx (a bulk copy's bytes landing)
// lowers; the phase completes when both are zero. try_wait.parity P returns true once the phase
// of parity P has completed, i.e. while the current phase's parity differs from P, so a wait with
// parity 1 on a fresh barrier returns at once (the "phase before the first").
#include <algorithm>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/experimental/emulator/simt_sm90.h"

namespace hetplan::kernels::emu {
namespace {

constexpr int64_t kTxLimit = (int64_t{1} << 20) - 1;  // the tx-count's range, +-(2^20 - 1)

struct Landing {
  uint32_t dst;
  std::vector<unsigned char> data;
  int64_t phase;  // the phase whose completion the copy's bytes counted towards
};

struct Barrier {
  int count = 0;
  int pending = 0;
  int64_t tx = 0;
  int64_t phase = 0;
  std::vector<Landing> landing;  // copies whose data no wait has observed yet
};

struct PendingReduce {
  float* dst;
  uint32_t src;
  uint32_t bytes;
  int group;  // -1 until committed
};

struct ThreadState {
  std::map<uint32_t, int64_t> observed;  // per barrier: the last phase this thread saw complete
  std::vector<PendingReduce> reduces;
  int next_group = 0;
};

struct BlockState {
  std::map<uint32_t, Barrier> barriers;
  std::vector<ThreadState> threads;
  std::vector<uint16_t> being_read;  // per shared-memory byte: pending bulk reduces reading it
};

BlockState g_block;
uint64_t g_serial = ~uint64_t{0};

BlockState& block() {
  if (g_serial != block_serial()) {
    g_block = BlockState{};
    g_block.threads.resize(1024);
    g_serial = block_serial();
  }
  return g_block;
}

std::string at(uint32_t offset) { return "mbarrier at shared offset " + std::to_string(offset); }

uint32_t barrier_offset(const void* bar, const char* op) {
  check_shared(bar, 8, 1);
  const uint32_t offset = smem_offset(bar);
  if (offset % 8 != 0)
    throw std::runtime_error(std::string(op) + ": " + at(offset) + " is not 8-byte aligned");
  return offset;
}

Barrier& barrier(uint32_t offset, const char* op) {
  auto it = block().barriers.find(offset);
  if (it == block().barriers.end())
    throw std::runtime_error(std::string(op) + " on " + at(offset) +
                             ", which no mbarrier.init of this block set up");
  return it->second;
}

void check_tx_range(const Barrier& b, uint32_t offset, const char* op) {
  if (b.tx > kTxLimit || b.tx < -kTxLimit)
    throw std::runtime_error(std::string(op) + ": tx-count of " + at(offset) + " phase " +
                             std::to_string(b.phase) + " is " + std::to_string(b.tx) +
                             ", outside the range +-(2^20 - 1)");
}

// Completes the current phase if its arrivals and tx-count are both in.
void try_complete(Barrier& b, uint32_t offset, const char* op) {
  if (b.pending != 0) return;
  if (b.tx < 0)
    throw std::runtime_error(
        std::string(op) + ": tx-count underflow on " + at(offset) + ", phase " +
        std::to_string(b.phase) + ": its arrivals are all in and bulk copies completed " +
        std::to_string(-b.tx) +
        " bytes more than arrive.expect_tx announced (on the GPU the phase completes with part "
        "of the data still in flight)");
  if (b.tx > 0) return;
  ++b.phase;
  b.pending = b.count;
}

void check_bulk_rules(const void* smem, const void* global, uint32_t bytes, const char* op) {
  if (bytes == 0 || bytes % 16 != 0)
    throw std::runtime_error(std::string(op) + ": size " + std::to_string(bytes) +
                             " bytes is not a positive multiple of 16");
  if (reinterpret_cast<uintptr_t>(smem) % 16 != 0 || reinterpret_cast<uintptr_t>(global) % 16 != 0)
    throw std::runtime_error(std::string(op) +
                             ": shared and global addresses must be 16-byte "
                             "aligned");
  check_shared(smem, bytes, 16);
  check_global(global, bytes, 16);
}

// Lands the data of every copy that counted towards phases up to `phase`.
void land(Barrier& b, int64_t phase) {
  auto done = std::stable_partition(b.landing.begin(), b.landing.end(),
                                    [&](const Landing& l) { return l.phase > phase; });
  for (auto it = done; it != b.landing.end(); ++it)
    std::memcpy(smem_at(it->dst, it->data.size()), it->data.data(), it->data.size());
  b.landing.erase(done, b.landing.end());
}

void apply_reduce(BlockState& s, const PendingReduce& r) {
  const unsigned char* src = smem_at(r.src, r.bytes);
  for (uint32_t i = 0; i < r.bytes / 4; ++i) {
    float v;
    std::memcpy(&v, src + 4 * i, 4);
    r.dst[i] += v;
  }
  for (uint32_t i = r.src; i < r.src + r.bytes; ++i) --s.being_read[i];
}

bool mbarrier_phase_done(uint32_t offset, int parity) {
  const auto it = block().barriers.find(offset);
  return it != block().barriers.end() && (it->second.phase & 1) != parity;
}

std::string mbarrier_describe(uint32_t offset) {
  const auto it = block().barriers.find(offset);
  if (it == block().barriers.end()) return at(offset) + ", not initialised";
  const Barrier& b = it->second;
  return at(offset) + ", phase " + std::to_string(b.phase) + ": " + std::to_string(b.pending) +
         " of " + std::to_string(b.count) + " arrivals pending, tx-count " + std::to_string(b.tx) +
         " bytes outstanding";
}

void thread_exit_check() {
  if (g_serial != block_serial()) return;
  const ThreadState& t = g_block.threads.at(static_cast<size_t>(linear_thread()));
  if (!t.reduces.empty())
    throw std::runtime_error(
        "thread exited with " + std::to_string(t.reduces.size()) +
        " cp.reduce.async.bulk never waited for (cp.async.bulk.wait_group.read); the first reads "
        "shared offset " +
        std::to_string(t.reduces.front().src));
}

void block_end_check() {
  if (g_serial != block_serial()) return;
  for (const auto& [offset, b] : g_block.barriers) {
    if (!b.landing.empty())
      throw std::runtime_error("block ended with a bulk copy into shared offset " +
                               std::to_string(b.landing.front().dst) + " (" + at(offset) +
                               ", phase " + std::to_string(b.landing.front().phase) +
                               ") that no mbarrier wait observed");
    if (b.tx < 0)
      throw std::runtime_error("block ended with " + at(offset) + " phase " +
                               std::to_string(b.phase) + " at tx-count " + std::to_string(b.tx) +
                               ": bulk copies brought more bytes than arrive.expect_tx announced");
  }
}

void check_generic_write(uint32_t offset, size_t bytes) {
  if (g_serial != block_serial()) return;
  const std::vector<uint16_t>& r = g_block.being_read;
  for (size_t i = offset; i < offset + bytes && i < r.size(); ++i)
    if (r[i] != 0)
      throw std::runtime_error(
          "generic write to shared offset " + std::to_string(i) +
          " while a cp.reduce.async.bulk still reads it (no cp.async.bulk.wait_group.read by its "
          "issuing thread since the issue)");
}

class Bulk : public Extension {
 public:
  void generic_smem_write(uint32_t offset, size_t bytes) override {
    check_generic_write(offset, bytes);
  }
  void thread_exit() override { thread_exit_check(); }
  void block_end() override { block_end_check(); }
};

Bulk g_bulk;
// Registered when this file is linked in (a kernel or test using mbarriers), before any launch.
[[maybe_unused]] const bool g_registered = (add_extension(&g_bulk), true);

}  // namespace

void mbarrier_init(const void* bar, int arrivals) {
  const uint32_t offset = barrier_offset(bar, "mbarrier.init");
  if (arrivals < 1 || arrivals > kTxLimit)
    throw std::runtime_error("mbarrier.init: arrival count " + std::to_string(arrivals) +
                             " outside 1 .. 2^20 - 1");
  BlockState& s = block();
  if (auto it = s.barriers.find(offset); it != s.barriers.end() && !it->second.landing.empty())
    throw std::runtime_error("mbarrier.init on " + at(offset) +
                             " while bulk copies completing on it are unobserved");
  Barrier b;
  b.count = b.pending = arrivals;
  s.barriers[offset] = b;
  // The init writes the object through the generic proxy: the async proxy (a bulk copy's
  // complete_tx) sees it only after the initialising thread's fence.proxy.async.
  note_generic_smem_write(bar, 8);
}

void mbarrier_arrive(const void* bar, uint32_t expect_tx_bytes) {
  const char* op = expect_tx_bytes ? "mbarrier.arrive.expect_tx" : "mbarrier.arrive";
  const uint32_t offset = barrier_offset(bar, op);
  Barrier& b = barrier(offset, op);
  if (b.pending == 0)
    throw std::runtime_error(std::string(op) + " on " + at(offset) + ", phase " +
                             std::to_string(b.phase) + ": more arrivals than its count of " +
                             std::to_string(b.count));
  b.tx += expect_tx_bytes;
  check_tx_range(b, offset, op);
  --b.pending;
  const int64_t phase = b.phase;
  try_complete(b, offset, op);
  if (b.phase != phase) yield_after_release();
}

void mbarrier_wait_parity(const void* bar, int parity) {
  const char* op = "mbarrier.try_wait.parity";
  const uint32_t offset = barrier_offset(bar, op);
  if (parity != 0 && parity != 1)
    throw std::runtime_error(std::string(op) + ": parity must be 0 or 1");
  Barrier& b = barrier(offset, op);  // std::map: the reference outlives other insertions
  int64_t seen;
  if ((b.phase & 1) != parity) {
    seen = b.phase - 1;  // completed already (-1: the phase before the first)
  } else {
    const int64_t wanted = b.phase;
    block_until([offset, parity] { return mbarrier_phase_done(offset, parity); },
                [offset, parity] {
                  return "mbarrier wait for parity " + std::to_string(parity) + " (" +
                         mbarrier_describe(offset) + ")";
                });
    if (b.phase != wanted + 1)
      throw std::runtime_error(std::string(op) + " on " + at(offset) + ": phases " +
                               std::to_string(wanted) + " and " + std::to_string(wanted + 1) +
                               " both completed while this thread waited for the first; parity "
                               "cannot tell them apart");
    seen = wanted;
  }
  ThreadState& t = block().threads.at(static_cast<size_t>(linear_thread()));
  const auto last = t.observed.find(offset);
  const bool first = last == t.observed.end();
  if ((first && seen > 0) || (!first && seen != last->second + 1)) {
    const std::string saw = first ? "none" : std::to_string(last->second);
    throw std::runtime_error(std::string(op) + " " + std::to_string(parity) + " on " + at(offset) +
                             " returns the completion of phase " + std::to_string(seen) +
                             (!first && seen <= last->second
                                  ? ", which this thread has observed already (wrong parity: "
                                    "the phase it wants is still in progress)"
                                  : ", skipping a phase") +
                             "; last phase this thread saw complete: " + saw);
  }
  t.observed[offset] = seen;
  land(b, seen);
}

void bulk_copy_g2s(void* smem_dst, const void* global_src, uint32_t bytes, const void* bar) {
  const char* op = "cp.async.bulk.shared::cluster.global";
  check_bulk_rules(smem_dst, global_src, bytes, op);
  const uint32_t offset = barrier_offset(bar, op);
  Barrier& b = barrier(offset, op);
  check_async_proxy_access(offset, 8, "cp.async.bulk's complete_tx on its mbarrier reads");
  const uint32_t dst = smem_offset(smem_dst);
  check_async_proxy_access(dst, bytes, "cp.async.bulk overwrites");
  for (const auto& [other, unused] : block().barriers)
    if (other + 8 > dst && other < dst + bytes)
      throw std::runtime_error(std::string(op) + ": destination overlaps " + at(other));
  // An earlier copy into these bytes whose data no wait has observed yet loses them: on the GPU
  // the two land in either order, so a stage refilled before its readers are done reads garbage.
  for (auto& [unused, other] : block().barriers)
    for (Landing& earlier : other.landing)
      for (uint32_t i = std::max(dst, earlier.dst);
           i < std::min(dst + bytes, earlier.dst + static_cast<uint32_t>(earlier.data.size())); ++i)
        earlier.data[i - earlier.dst] = 0xff;
  Landing l{dst, std::vector<unsigned char>(bytes), b.phase};
  std::memcpy(l.data.data(), global_src, bytes);
  // The destination is undefined from the issue until a wait observes the phase's completion.
  std::memset(smem_at(dst, bytes), 0xff, bytes);
  b.landing.push_back(std::move(l));
  b.tx -= bytes;
  check_tx_range(b, offset, op);
  try_complete(b, offset, op);
}

void bulk_reduce_add_f32(float* global_dst, const void* smem_src, uint32_t bytes) {
  const char* op = "cp.reduce.async.bulk.global.shared::cta.add.f32";
  check_bulk_rules(smem_src, global_dst, bytes, op);
  const uint32_t src = smem_offset(smem_src);
  check_async_proxy_access(src, bytes, "cp.reduce.async.bulk reads");
  BlockState& s = block();
  if (s.being_read.size() < src + bytes) s.being_read.resize(src + bytes, 0);
  for (uint32_t i = src; i < src + bytes; ++i) ++s.being_read[i];
  s.threads.at(static_cast<size_t>(linear_thread()))
      .reduces.push_back(PendingReduce{global_dst, src, bytes, -1});
}

void bulk_commit() {
  ThreadState& t = block().threads.at(static_cast<size_t>(linear_thread()));
  for (PendingReduce& r : t.reduces)
    if (r.group < 0) r.group = t.next_group;
  ++t.next_group;
}

void bulk_wait_read(int groups_left_pending) {
  BlockState& s = block();
  ThreadState& t = s.threads.at(static_cast<size_t>(linear_thread()));
  const int newest = t.next_group - 1 - groups_left_pending;
  std::vector<PendingReduce> keep;
  for (const PendingReduce& r : t.reduces) {
    if (r.group >= 0 && r.group <= newest)
      apply_reduce(s, r);
    else
      keep.push_back(r);
  }
  t.reduces.swap(keep);
}

}  // namespace hetplan::kernels::emu
