// wgmma (warpgroup MMA, sm_90a) and setmaxnreg under the emulator: matrix descriptors with the
// 128-byte swizzle, A from shared memory or registers, B from shared memory, K-major or MN-major
// (transposed), and the asynchronous completion by commit and wait groups. Definitions from the PTX
// ISA
// ("Asynchronous Warpgroup Level Matrix Multiply-Accumulate": matrix descriptor format, the
// canonical layouts, the register fragments of m64nNk16), restated in the comments below.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/experimental/emulator/simt_sm90.h"
#include "kernels/reference/numeric.h"

namespace hetplan::kernels::emu {
namespace {

constexpr int kMaxN = 256;

struct PendingWgmma {
  float* d;
  int n;
  int group;  // -1 until committed
  bool scale_d, trans_a, trans_b, bf16, a_in_regs;
  bool chained;  // accumulates onto an earlier pending wgmma's result in the same registers
  uint64_t a_desc, b_desc;
  int warp_in_group;
  float a_rows[2][16];  // this lane's rows g and g + 8 of A (16 x 16 per warp), from registers
  float c[kMaxN / 2];
};

struct ThreadState {
  std::vector<PendingWgmma> pending;
  int next_group = 0;
  bool fenced = false;  // a wgmma.fence since the start or the last wait
};

std::vector<ThreadState> g_threads;
std::vector<int> g_warp_registers;  // per warp: the last setmaxnreg count, 0 if none
uint64_t g_serial = ~uint64_t{0};
std::function<void(int)> g_issue_hook;

void reset_if_new_block() {
  if (g_serial != block_serial()) {
    g_threads.assign(1024, ThreadState{});
    g_warp_registers.assign(32, 0);
    g_serial = block_serial();
  }
}

ThreadState& state(int linear) {
  reset_if_new_block();
  return g_threads.at(static_cast<size_t>(linear));
}

float element(uint16_t bits, bool bf16) {
  return bf16 ? bf16_bits_to_float(bits) : fp16_bits_to_float(bits);
}

// Element (mn, k) of a 16-bit operand in shared memory. Descriptor (PTX ISA, "Matrix
// Descriptor Format"): bits 0-13 start address >> 4, 16-29 leading-dimension byte offset >> 4,
// 32-45 stride-dimension byte offset >> 4, 49-51 base offset, 62-63 swizzle (1 = 128 bytes).
// Canonical 128-byte-swizzle layouts in 16-byte units, T = 8 elements (CUTLASS's notation):
//   K-major:  ((8, m), (T, 2)) : ((8T, SBO), (1, T))   rows of 128 bytes, 8-row groups SBO apart
//   MN-major: ((T, 8, m), (8, k)) : ((1, T, LBO), (8T, SBO))   64 MN-contiguous elements per
//             128-byte row, one row per k, 8-k groups SBO apart, 64-element MN groups LBO apart
// then the swizzle on the byte address: bits 4-6 ^= bits 7-9 (16-byte chunk ^= row within the
// 1024-byte atom), which is why atoms must start 1024-byte aligned (base offset 0).
float read_operand(uint64_t desc, int mn, int k, bool mn_major, bool bf16) {
  const uint32_t start = static_cast<uint32_t>(desc & 0x3fff) << 4;
  const uint32_t lbo = static_cast<uint32_t>((desc >> 16) & 0x3fff) << 4;
  const uint32_t sbo = static_cast<uint32_t>((desc >> 32) & 0x3fff) << 4;
  const int base_offset = static_cast<int>((desc >> 49) & 7),
            swizzle = static_cast<int>(desc >> 62);
  if (swizzle != 1 || base_offset != 0)
    throw std::runtime_error(
        "wgmma descriptor: only the 128-byte swizzle with base offset 0 is emulated");
  uint32_t addr;
  if (!mn_major) {
    addr = start + static_cast<uint32_t>(mn / 8) * sbo + static_cast<uint32_t>(mn % 8) * 128 +
           static_cast<uint32_t>(k) * 2;
  } else {
    addr = start + static_cast<uint32_t>(mn / 64) * lbo + static_cast<uint32_t>(k / 8) * sbo +
           static_cast<uint32_t>(k % 8) * 128 + static_cast<uint32_t>(mn % 64) * 2;
  }
  addr ^= ((addr >> 7) & 7) << 4;
  check_async_proxy_read(addr, 2);
  uint16_t bits;
  std::memcpy(&bits, smem_at(addr, 2), 2);
  return element(bits, bf16);
}

// The accumulator fragment of m64nNk16 (PTX ISA, "Register Fragments: Matrix D"): thread lane
// 4g + q of warp w holds d[i], i = 4j + e, at row 16 w + g + 8 (e >> 1), column 8 j + 2 q + (e &
// 1).
void execute(PendingWgmma& op, int lane) {
  const int g = lane / 4, q = lane % 4;
  float out[kMaxN / 2];
  for (int i = 0; i < op.n / 2; ++i) {
    const int j = i / 4, e = i % 4;
    const int row = g + 8 * (e >> 1), col = 8 * j + 2 * q + (e & 1);
    double acc = !op.scale_d ? 0.0 : op.chained ? op.d[i] : op.c[i];
    for (int k = 0; k < 16; ++k) {
      const double a = op.a_in_regs ? op.a_rows[e >> 1][k]
                                    : read_operand(op.a_desc, 16 * op.warp_in_group + row, k,
                                                   op.trans_a, op.bf16);
      acc += a * read_operand(op.b_desc, col, k, op.trans_b, op.bf16);
    }
    out[i] = static_cast<float>(acc);
  }
  std::memcpy(op.d, out, sizeof(float) * static_cast<size_t>(op.n / 2));
}

enum { kOpIssue = 900, kOpWait = 901 };

struct IssuePayload {
  uint32_t a[4];
  uint64_t a_desc, b_desc;
  int n, flags;
};

}  // namespace

void wgmma_async(float* d, int n, const uint32_t* a_regs, uint64_t a_desc, uint64_t b_desc,
                 bool scale_d, bool trans_a, bool trans_b, bool bf16) {
  if (n < 8 || n > kMaxN || n % 8 != 0)
    throw std::runtime_error("wgmma: bad N " + std::to_string(n));
  IssuePayload mine{};
  if (a_regs) std::memcpy(mine.a, a_regs, sizeof mine.a);
  mine.a_desc = a_regs ? 0 : a_desc;
  mine.b_desc = b_desc;
  mine.n = n;
  mine.flags = (a_regs ? 1 : 0) | (trans_a ? 2 : 0) | (trans_b ? 4 : 0) | (bf16 ? 8 : 0) |
               (scale_d ? 16 : 0);
  Payload p{};
  std::memcpy(p.bytes, &mine, sizeof mine);
  const Payload* all = warp_exchange(p, kOpIssue);
  const int me = linear_thread(), lane = me % 32;
  if (lane == 0 && g_issue_hook) g_issue_hook(me / 32);
  PendingWgmma op{};
  for (int l = 0; l < 32; ++l) {
    IssuePayload other;
    std::memcpy(&other, all[l].bytes, sizeof other);
    if (other.a_desc != mine.a_desc || other.b_desc != mine.b_desc || other.n != n ||
        other.flags != mine.flags)
      throw std::runtime_error("wgmma: operands differ between the lanes of a warp");
    if (!a_regs) continue;
    // mma.sync's A fragment layout (PTX ISA, wgmma "Register Fragments: Matrix A" for .bf16):
    // a0 (row g, k 2q..), a1 (row g+8, k 2q..), a2 (row g, k 2q+8..), a3 (row g+8, k 2q+8..).
    const int g = l / 4, q = l % 4;
    for (int r = 0; r < 4; ++r) {
      const int row = g + 8 * (r & 1), k0 = 2 * q + 8 * (r >> 1);
      if (row % 8 != lane / 4) continue;
      for (int h = 0; h < 2; ++h)
        op.a_rows[row / 8][k0 + h] =
            element(static_cast<uint16_t>(h ? other.a[r] >> 16 : other.a[r] & 0xffffu), bf16);
    }
  }
  op.d = d;
  op.n = n;
  op.group = -1;
  op.scale_d = scale_d;
  op.trans_a = trans_a;
  op.trans_b = trans_b;
  op.bf16 = bf16;
  op.a_in_regs = a_regs != nullptr;
  op.a_desc = a_desc;
  op.b_desc = b_desc;
  op.warp_in_group = (me / 32) % 4;
  // A wgmma onto registers that an earlier one, still pending, writes reads that one's result
  // (they run in issue order); otherwise it reads the registers now, which then read as NaN.
  ThreadState& t = state(me);
  if (!t.fenced)
    throw std::runtime_error(
        "wgmma.mma_async without a wgmma.fence since the thread's start or its last "
        "wgmma wait (registers it may have written are read asynchronously)");
  for (const PendingWgmma& earlier : t.pending) op.chained = op.chained || earlier.d == d;
  if (!op.chained) {
    std::memcpy(op.c, d, sizeof(float) * static_cast<size_t>(n / 2));
    for (int i = 0; i < n / 2; ++i) d[i] = std::numeric_limits<float>::quiet_NaN();
  }
  t.pending.push_back(op);
}

void wgmma_fence() { state(linear_thread()).fenced = true; }

void set_wgmma_issue_hook(std::function<void(int warp)> hook) { g_issue_hook = std::move(hook); }

void wgmma_commit() {
  ThreadState& t = state(linear_thread());
  for (PendingWgmma& op : t.pending)
    if (op.group < 0) op.group = t.next_group;
  ++t.next_group;
}

void wgmma_wait(int groups_left_pending) {
  state(linear_thread()).fenced = false;
  const int newest = state(linear_thread()).next_group - 1 - groups_left_pending;
  // All lanes of the warp retire their operations at once, when the last one arrives: a lane
  // that went on first must not change shared memory under the others' pending reads.
  warp_exchange(Payload{}, kOpWait + 100 * groups_left_pending, [newest](int first) {
    for (int l = 0; l < 32; ++l) {
      ThreadState& t = state(first + l);
      std::vector<PendingWgmma> keep;
      for (PendingWgmma& op : t.pending) {
        if (op.group >= 0 && op.group <= newest)
          execute(op, l);
        else
          keep.push_back(op);
      }
      t.pending.swap(keep);
    }
  });
}

void setmaxnreg(int registers, bool increase) {
  const Dim3& b = block_dim();
  const int n = static_cast<int>(b.x * b.y * b.z);
  const char* op = increase ? "setmaxnreg.inc" : "setmaxnreg.dec";
  if (registers < 24 || registers > 256 || registers % 8 != 0)
    throw std::runtime_error(std::string(op) + ": " + std::to_string(registers) +
                             " registers is not one of 24 .. 256 in steps of 8");
  if (n % 128 != 0)
    throw std::runtime_error(std::string(op) + " in a block of " + std::to_string(n) +
                             " threads, not whole warpgroups");
  reset_if_new_block();
  Payload mine{};
  warp_exchange(mine, 5000 + 2 * registers + (increase ? 1 : 0), [&](int first_lane) {
    std::vector<int>& regs = g_warp_registers;
    const int warp = first_lane / 32;
    for (int w = warp / 4 * 4; w < warp / 4 * 4 + 4; ++w)
      if (regs[static_cast<size_t>(w)] != 0 && regs[static_cast<size_t>(w)] != registers)
        throw std::runtime_error(std::string(op) + ": warp " + std::to_string(warp) + " asks for " +
                                 std::to_string(registers) + " registers, warp " +
                                 std::to_string(w) + " of its warpgroup for " +
                                 std::to_string(regs[static_cast<size_t>(w)]));
    regs[static_cast<size_t>(warp)] = registers;
    int total = 0;
    for (const int r : regs) total += 32 * r;
    if (total > 65536)
      throw std::runtime_error(std::string(op) + ": the block's warps ask for " +
                               std::to_string(total) +
                               " registers in all, more than the SM's 65536 (an .inc would "
                               "wait forever)");
  });
}

}  // namespace hetplan::kernels::emu
