#include "profiler/collectives/harness.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace hetplan::profiler::coll {

TimingPlan timing_plan(bool quick) {
  TimingPlan p;
  if (quick) {
    p.warmup = 2;
    p.batches = 5;
    p.target_batch_s = 2e-3;
    p.max_iterations = 50;
  }
  return p;
}

Workspace::Workspace(const CommGroup& group, size_t buffer_bytes) : buffer_bytes_(buffer_bytes) {
  for (size_t i = 0; i < group.local_count(); ++i) {
    CUDA_CHECK(cudaSetDevice(group.member(i).device));
    send_.emplace_back(buffer_bytes, "a collective's send buffer");
    recv_.emplace_back(buffer_bytes, "a collective's receive buffer");
    errors_.emplace_back(sizeof(unsigned long long), "a collective's error counter");
  }
}

size_t local_buffer_capacity(const std::vector<LocalMember>& members, size_t wanted) {
  size_t cap = wanted;
  constexpr size_t kReserve = size_t(1) << 30;  // NCCL buffers, driver, other processes
  for (const auto& m : members) {
    CUDA_CHECK(cudaSetDevice(m.device));
    size_t free_bytes = 0, total = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total));
    const size_t usable = free_bytes > kReserve ? (free_bytes - kReserve) / 2 : 0;
    cap = std::min(cap, usable);
  }
  return cap;
}

namespace {

// Events of one batch on every local GPU.
struct BatchEvents {
  std::vector<CudaEvent> start, stop;
  explicit BatchEvents(const CommGroup& g) {
    for (size_t i = 0; i < g.local_count(); ++i) {
      CUDA_CHECK(cudaSetDevice(g.member(i).device));
      start.emplace_back();
      stop.emplace_back();
    }
  }
};

// Runs `iterations` operations back to back and returns the slowest local GPU's time per
// operation; `indices` are the local members taking part.
template <typename Enqueue>
double timed_batch(CommGroup& g, BatchEvents& ev, const std::vector<size_t>& indices,
                   int iterations, Enqueue&& enqueue) {
  for (size_t i : indices) {
    CUDA_CHECK(cudaSetDevice(g.member(i).device));
    CUDA_CHECK(cudaEventRecord(ev.start[i].get(), g.stream(i)));
  }
  for (int it = 0; it < iterations; ++it) enqueue();
  for (size_t i : indices) {
    CUDA_CHECK(cudaSetDevice(g.member(i).device));
    CUDA_CHECK(cudaEventRecord(ev.stop[i].get(), g.stream(i)));
  }
  g.wait_streams();
  double slowest = 0;
  for (size_t i : indices) slowest = std::max(slowest, ev.stop[i].seconds_since(ev.start[i]));
  return slowest / iterations;
}

int iterations_for(double per_op_s, const TimingPlan& plan) {
  if (!(per_op_s > 0)) return 1;
  return std::clamp(static_cast<int>(std::ceil(plan.target_batch_s / per_op_s)), 1,
                    plan.max_iterations);
}

// Shared skeleton: check, warm up, agree, time. `prepare` fills inputs and clears outputs,
// `enqueue` runs one operation on the participating GPUs, `check` returns wrong elements.
template <typename Prepare, typename Enqueue, typename Check>
RankRecord run_measurement(CommGroup& g, const std::vector<size_t>& indices, double bytes,
                           const TimingPlan& plan, const AgreeFn& agree, Prepare&& prepare,
                           Enqueue&& enqueue, Check&& check) {
  RankRecord rec;
  rec.bytes = bytes;
  if (indices.empty()) {  // not in this measurement: keep the agreement in step
    agree(0);
    return rec;
  }
  double estimate = -1;
  try {
    prepare();
    enqueue();
    g.wait_streams();
    const unsigned long long wrong = check();
    if (wrong > 0) {
      rec.ok = false;
      rec.error = fmt::format("incorrect result: {} wrong elements", wrong);
    } else {
      for (int i = 0; i < plan.warmup; ++i) enqueue();
      g.wait_streams();
      BatchEvents ev(g);
      estimate = timed_batch(g, ev, indices, 1, enqueue);
    }
  } catch (const NcclFault& e) {
    rec.ok = false;
    rec.error = e.what();
  }
  const double agreed = agree(rec.ok ? estimate : -1);
  if (!rec.ok) return rec;
  if (agreed < 0) {
    rec.ok = false;
    rec.error = "another rank failed before timing";
    return rec;
  }
  try {
    BatchEvents ev(g);
    const int iterations = iterations_for(agreed, plan);
    for (int b = 0; b < plan.batches; ++b)
      rec.samples_s.push_back(timed_batch(g, ev, indices, iterations, enqueue));
  } catch (const NcclFault& e) {
    rec.ok = false;
    rec.error = e.what();
    rec.samples_s.clear();
  }
  return rec;
}

}  // namespace

RankRecord measure_collective(CommGroup& g, Workspace& ws, const CollectiveOps& ops, Dtype dtype,
                              double bytes, const TimingPlan& plan, const AgreeFn& agree) {
  const ncclDataType_t type = nccl_type(dtype);
  const size_t elem = element_bytes(dtype);
  const int n = g.nranks();
  // Whole elements, a multiple of the group size (nccl-tests rounds the same way).
  size_t count = std::max<size_t>(static_cast<size_t>(bytes) / elem / n, 1) * n;
  std::vector<RankBuffers> bufs;
  std::vector<size_t> indices;
  for (size_t i = 0; i < g.local_count(); ++i) {
    RankBuffers b;
    b.send = ws.send(i);
    b.recv = ws.recv(i);
    ops.counts(count, n, &b.send_count, &b.recv_count);
    b.elem_bytes = elem;
    b.dtype = dtype;
    b.rank = g.member(i).rank;
    b.nranks = n;
    bufs.push_back(b);
    indices.push_back(i);
  }
  size_t sc = 0, rc = 0;
  ops.counts(count, n, &sc, &rc);
  const double moved = static_cast<double>(std::max(sc, rc) * elem);
  if (moved > ws.buffer_bytes()) {
    RankRecord rec;
    rec.bytes = moved;
    agree(-1);
    rec.ok = false;
    rec.error = fmt::format("needs {:.0f} bytes per buffer, only {} fit in GPU memory", moved,
                            ws.buffer_bytes());
    return rec;
  }
  auto prepare = [&] {
    for (size_t i : indices) {
      CUDA_CHECK(cudaSetDevice(g.member(i).device));
      ops.init(bufs[i], g.stream(i));
      CUDA_CHECK(cudaMemsetAsync(bufs[i].recv, 0xFF, bufs[i].recv_count * elem, g.stream(i)));
    }
  };
  auto enqueue = [&] {
    grouped(g, [&] {
      for (size_t i : indices) {
        CUDA_CHECK(cudaSetDevice(g.member(i).device));
        const ncclResult_t r = ops.run(bufs[i], type, g.comm(i), g.stream(i));
        if (r != ncclSuccess && r != ncclInProgress) return r;
      }
      return ncclSuccess;
    });
  };
  auto check = [&] {
    unsigned long long total = 0;
    for (size_t i : indices) {
      CUDA_CHECK(cudaSetDevice(g.member(i).device));
      CUDA_CHECK(cudaMemsetAsync(ws.errors(i), 0, sizeof(unsigned long long), g.stream(i)));
      ops.check(bufs[i], ws.errors(i), g.stream(i));
      unsigned long long wrong = 0;
      CUDA_CHECK(
          cudaMemcpyAsync(&wrong, ws.errors(i), sizeof wrong, cudaMemcpyDeviceToHost, g.stream(i)));
      CUDA_CHECK(cudaStreamSynchronize(g.stream(i)));
      total += wrong;
    }
    return total;
  };
  return run_measurement(g, indices, moved, plan, agree, prepare, enqueue, check);
}

RankRecord measure_p2p(CommGroup& g, Workspace& ws, int src, int dst, double bytes,
                       const TimingPlan& plan, const AgreeFn& agree) {
  const size_t count = std::max<size_t>(static_cast<size_t>(bytes) / 4, 1);  // fp32 elements
  const double moved = static_cast<double>(count * 4);
  std::vector<size_t> indices;
  int src_index = -1, dst_index = -1;
  for (size_t i = 0; i < g.local_count(); ++i) {
    if (g.member(i).rank == src) src_index = static_cast<int>(i);
    if (g.member(i).rank == dst) dst_index = static_cast<int>(i);
    if (g.member(i).rank == src || g.member(i).rank == dst) indices.push_back(i);
  }
  auto prepare = [&] {
    if (src_index >= 0) {
      CUDA_CHECK(cudaSetDevice(g.member(src_index).device));
      fill_sender_pattern(ws.send(src_index), count, src, g.stream(src_index));
    }
    if (dst_index >= 0) {
      CUDA_CHECK(cudaSetDevice(g.member(dst_index).device));
      CUDA_CHECK(cudaMemsetAsync(ws.recv(dst_index), 0xFF, count * 4, g.stream(dst_index)));
    }
  };
  auto enqueue = [&] {
    grouped(g, [&] {
      if (src_index >= 0) {
        CUDA_CHECK(cudaSetDevice(g.member(src_index).device));
        const ncclResult_t r = ncclSend(ws.send(src_index), count, ncclFloat32, dst,
                                        g.comm(src_index), g.stream(src_index));
        if (r != ncclSuccess && r != ncclInProgress) return r;
      }
      if (dst_index >= 0) {
        CUDA_CHECK(cudaSetDevice(g.member(dst_index).device));
        const ncclResult_t r = ncclRecv(ws.recv(dst_index), count, ncclFloat32, src,
                                        g.comm(dst_index), g.stream(dst_index));
        if (r != ncclSuccess && r != ncclInProgress) return r;
      }
      return ncclSuccess;
    });
  };
  auto check = [&]() -> unsigned long long {
    if (dst_index < 0) return 0;  // the receiving process checks
    CUDA_CHECK(cudaSetDevice(g.member(dst_index).device));
    cudaStream_t s = g.stream(dst_index);
    CUDA_CHECK(cudaMemsetAsync(ws.errors(dst_index), 0, sizeof(unsigned long long), s));
    check_sender_pattern(ws.recv(dst_index), count, src, ws.errors(dst_index), s);
    unsigned long long wrong = 0;
    CUDA_CHECK(
        cudaMemcpyAsync(&wrong, ws.errors(dst_index), sizeof wrong, cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    return wrong;
  };
  if (moved > ws.buffer_bytes()) {
    RankRecord rec;
    rec.bytes = moved;
    agree(-1);
    rec.ok = false;
    rec.error = "message larger than the GPU buffers";
    return rec;
  }
  return run_measurement(g, indices, moved, plan, agree, prepare, enqueue, check);
}

}  // namespace hetplan::profiler::coll
