#include "costmodel/op_times.h"

#include <fmt/format.h>

namespace hetplan {
namespace {

std::string gemm_what(const GemmOp& g, Dtype dtype) {
  const GemmShape& s = g.shape;
  std::string out = fmt::format("m{} n{} k{}", s.m, s.n, s.k);
  if (s.batch > 1) out += fmt::format(" x{}", s.batch);
  if (g.streams > 0) out += fmt::format(" (one kernel each over {} streams)", g.streams);
  out += fmt::format(" {}", to_string(g.quantized ? g.dtype : dtype));
  return out;
}

std::string bytes_text(double bytes) { return fmt::format("{:.1f} MB", bytes / 1e6); }

std::string comm_what(const CommOp& c, const LayerGroups& groups) {
  const CommGroup& g = groups.of(c.scope);
  std::string out =
      fmt::format("{} {} over {} ({} ranks, {} node{})", to_string(c.kind), bytes_text(c.bytes),
                  to_string(c.scope), g.size, g.nodes, g.nodes == 1 ? "" : "s");
  if (c.repeats > 1) out += fmt::format(", {} transfers", c.repeats);
  if (c.dedup_experts > 0) out += ", a token once per destination";
  if (c.overlap == CommOverlap::kAttention) out += ", before hiding behind attention";
  return out;
}

}  // namespace

std::vector<OpTime> op_times(const CostModel& cost, const GpuSpec& gpu, const LayerWork& work,
                             const LayerGroups& groups, Dtype dtype, const Recomputation& asked) {
  const Recomputation recompute = layer_recomputation(work, asked);
  std::vector<OpTime> out;
  for (const GemmOp& g : work.gemms)
    out.push_back({g.name, "gemm", g.pass, cost.gemm_op_s(gpu, dtype, g), gemm_what(g, dtype),
                   rerun_share(recompute, g.pass, g.group, g.op_rerun)});
  for (const MemoryOp& m : work.memory_ops) {
    std::string what = bytes_text(m.bytes);
    if (m.launches > 1) what += fmt::format(", {} kernels", m.launches);
    out.push_back({m.kernel, "memory", m.pass, cost.memory_op_s(gpu, m), what,
                   rerun_share(recompute, m.pass, m.group, m.op_rerun)});
  }
  for (const AttentionOp& a : work.attention) {
    std::string what =
        fmt::format("b{} heads {}/{} s{} d{}", a.batch, a.heads, a.kv_heads, a.seq_len, a.head_dim);
    if (a.kv_seq_len > 0) what += fmt::format(" kv{}", a.kv_seq_len);
    if (a.window > 0) what += fmt::format(" window {}", a.window);
    if (a.speed != 1) what += fmt::format(", kernel at {:.2f}x the calibrated", a.speed);
    out.push_back({"attention", "attention", a.pass, cost.attention_s(gpu, dtype, a), what,
                   rerun_share(recompute, a.pass, OpGroup::kDefault, a.op_rerun)});
  }
  for (const CommOp& c : work.comms)
    out.push_back({c.name, "comm", c.pass, cost.comm_op_s(c, groups), comm_what(c, groups),
                   rerun_share(recompute, c.pass, c.group, c.op_rerun)});
  return out;
}

}  // namespace hetplan
