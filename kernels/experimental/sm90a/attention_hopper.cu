// The Hopper attention kernels (attention_hopper_kernels.h), compiled for sm_90a only (wgmma
// exists nowhere else; kernels/experimental/CMakeLists.txt builds this folder as its own object
// library with CUDA_ARCHITECTURES 90a). attention.cu calls these launchers on compute capability
// 9.0.
#include <cstdlib>
#include <cstring>

#include "kernels/cuda_check.h"
#include "kernels/experimental/attention_hopper.h"
#include "kernels/experimental/attention_hopper_backward_ws_drift_kernels.h"
#include "kernels/experimental/attention_hopper_backward_ws_kernels.h"
#include "kernels/experimental/attention_hopper_forward_pingpong_kernels.h"
#include "kernels/experimental/attention_hopper_kernels.h"

namespace hetplan::kernels {
namespace {

// One block of two warpgroups per SM: 160 KB of shared memory (d = 128) and up to 255 registers.
template <class T, int kD>
__global__ void __launch_bounds__(kHopperThreads, 1)
    attention_forward_hopper_kernel(AttentionParams<T> p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  attention_forward_hopper_block<T, kD>(p);
#endif
}
// The ping-pong forward: a producer warpgroup and two consumers; the producer gives registers
// away with setmaxnreg, so the launch bound leaves 168 per thread until then.
template <class T, int kD, bool kBulkLoads>
__global__ void __launch_bounds__(kPingpongThreads, 1)
    attention_forward_pingpong_kernel(AttentionParams<T> p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  attention_forward_pingpong_block<T, kD, kBulkLoads>(p);
#endif
}
// The backward: two warpgroups and one block per SM (up to 255 registers), or (kWarpgroups = 1)
// one warpgroup per block and two blocks per SM (d = 128, 255 registers) or three (d = 64: 168
// registers, 58 KB of shared memory each).
constexpr int backward_hopper_min_blocks(int d, int warpgroups) {
  return warpgroups == 2 ? 1 : d == 64 ? 3 : 2;
}
template <class T, int kD, bool kBulkDq, int kWarpgroups>
__global__ void __launch_bounds__(128 * kWarpgroups, backward_hopper_min_blocks(kD, kWarpgroups))
    attention_backward_hopper_kernel(AttentionParams<T> p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  attention_backward_hopper_block<T, kD, kBulkDq, kWarpgroups>(p);
#endif
}

// The warp-specialised d = 128 backward: a producer warpgroup and two consumers; the producer
// gives registers away with setmaxnreg, so the launch bound leaves 168 per thread until then.
template <class T, int kD, bool kBulkLoads, bool kDqWriter>
__global__ void __launch_bounds__(kHopperWsThreads, 1)
    attention_backward_hopper_ws_kernel(AttentionParams<T> p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  attention_backward_hopper_ws_block<T, kD, kBulkLoads, kDqWriter>(p);
#endif
}

// Consumers that drift apart (d = 64 and 128): dQ split by keys, a dQ writer per consumer.
template <class T, int kD>
__global__ void __launch_bounds__(kHopperWsThreads, 1)
    attention_backward_hopper_ws_drift_kernel(AttentionParams<T> p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  attention_backward_hopper_ws_drift_block<T, kD>(p);
#endif
}

// HETPLAN_ATTENTION_BWD=ws (producer with bulk copies), ws-cpasync (producer with cp.async) or
// ws-dqw (bulk copies, and a warp of the producer adding dQ with bulk reduces): the d = 128
// backward runs warp-specialised (docs/kernels.md, "Warp-specialised backward"; dQ by
// red.global.add but in ws-dqw, HETPLAN_ATTENTION_DQ ignored); not the default until a GPU has
// measured it. ws-drift: the consumers drift apart (dQ split by keys, a dQ writer per consumer),
// d = 128 and d = 64 (the d = 64 backward reaches this file with HETPLAN_ATTENTION_KERNEL=wgmma).
// wg1: the default backward with one warpgroup per block (64 keys) and two (d = 128) or three
// (d = 64) blocks per SM (docs/kernels.md, "One warpgroup per block").
enum class WsBackward { kNone, kBulk, kCpAsync, kDqWriter, kDrift, kOneWarpgroup };
WsBackward ws_backward() {
  static const WsBackward ws = [] {
    const char* v = std::getenv("HETPLAN_ATTENTION_BWD");
    if (v != nullptr && std::strcmp(v, "ws") == 0) return WsBackward::kBulk;
    if (v != nullptr && std::strcmp(v, "ws-cpasync") == 0) return WsBackward::kCpAsync;
    if (v != nullptr && std::strcmp(v, "ws-dqw") == 0) return WsBackward::kDqWriter;
    if (v != nullptr && std::strcmp(v, "ws-drift") == 0) return WsBackward::kDrift;
    if (v != nullptr && std::strcmp(v, "wg1") == 0) return WsBackward::kOneWarpgroup;
    return WsBackward::kNone;
  }();
  return ws;
}

// HETPLAN_ATTENTION_FWD=pingpong (producer with bulk copies) or pingpong-cpasync (producer with
// cp.async): the forward runs warp-specialised with ping-pong consumers (docs/kernels.md,
// "Ping-pong forward"); not the default until a GPU has measured it.
enum class PingpongForward { kNone, kBulk, kCpAsync };
PingpongForward pingpong_forward() {
  static const PingpongForward pp = [] {
    const char* v = std::getenv("HETPLAN_ATTENTION_FWD");
    if (v != nullptr && std::strcmp(v, "pingpong") == 0) return PingpongForward::kBulk;
    if (v != nullptr && std::strcmp(v, "pingpong-cpasync") == 0) return PingpongForward::kCpAsync;
    return PingpongForward::kNone;
  }();
  return pp;
}

// HETPLAN_ATTENTION_DQ=bulk: the d = 128 backward adds dQ with bulk reduces (docs/kernels.md,
// "dQ by bulk reduce") instead of red.global.add.v4.f32; not the default until a GPU has
// measured it.
bool bulk_dq() {
  static const bool bulk = [] {
    const char* v = std::getenv("HETPLAN_ATTENTION_DQ");
    return v != nullptr && std::strcmp(v, "bulk") == 0;
  }();
  return bulk;
}

template <class T, int kD>
void forward(const AttentionParams<T>& p, cudaStream_t stream) {
  const size_t smem = attention_forward_hopper_smem_bytes<T, kD>();
  allow_dynamic_smem(reinterpret_cast<const void*>(&attention_forward_hopper_kernel<T, kD>), smem);
  const dim3 grid(static_cast<unsigned>(ceil_div(p.seq, kHopperTile)), p.heads, p.batch);
  attention_forward_hopper_kernel<T, kD><<<grid, kHopperThreads, smem, stream>>>(p);
  HETPLAN_CHECK_LAUNCH();
}

template <class T, int kD, bool kBulkLoads>
void forward_pingpong(const AttentionParams<T>& p, cudaStream_t stream) {
  const size_t smem = attention_forward_pingpong_smem_bytes<T, kD>();
  allow_dynamic_smem(
      reinterpret_cast<const void*>(&attention_forward_pingpong_kernel<T, kD, kBulkLoads>), smem);
  const dim3 grid(static_cast<unsigned>(ceil_div(p.seq, kHopperTile)), p.heads, p.batch);
  attention_forward_pingpong_kernel<T, kD, kBulkLoads><<<grid, kPingpongThreads, smem, stream>>>(p);
  HETPLAN_CHECK_LAUNCH();
}

template <class T, int kD>
void forward_dispatch(const AttentionParams<T>& p, cudaStream_t stream) {
  if (pingpong_forward() == PingpongForward::kBulk)
    forward_pingpong<T, kD, true>(p, stream);
  else if (pingpong_forward() == PingpongForward::kCpAsync)
    forward_pingpong<T, kD, false>(p, stream);
  else
    forward<T, kD>(p, stream);
}

template <class T, int kD, bool kBulkDq = false, int kWarpgroups = 2>
void backward(const AttentionParams<T>& p, cudaStream_t stream) {
  constexpr int kKeys = 64 * kWarpgroups;
  const size_t smem = attention_backward_hopper_smem_bytes<T, kD, kBulkDq, kKeys>();
  const void* kernel =
      reinterpret_cast<const void*>(&attention_backward_hopper_kernel<T, kD, kBulkDq, kWarpgroups>);
  allow_dynamic_smem(kernel, smem);
  const dim3 grid(static_cast<unsigned>(ceil_div(p.seq, kKeys)), p.heads, p.batch);
  attention_backward_hopper_kernel<T, kD, kBulkDq, kWarpgroups>
      <<<grid, 128 * kWarpgroups, smem, stream>>>(p);
  HETPLAN_CHECK_LAUNCH();
}

template <class T, int kD, bool kBulkLoads, bool kDqWriter = false>
void backward_ws(const AttentionParams<T>& p, cudaStream_t stream) {
  const size_t smem = attention_backward_hopper_ws_smem_bytes<T, kD, kDqWriter>();
  allow_dynamic_smem(reinterpret_cast<const void*>(
                         &attention_backward_hopper_ws_kernel<T, kD, kBulkLoads, kDqWriter>),
                     smem);
  const dim3 grid(static_cast<unsigned>(ceil_div(p.seq, kHopperTile)), p.heads, p.batch);
  attention_backward_hopper_ws_kernel<T, kD, kBulkLoads, kDqWriter>
      <<<grid, kHopperWsThreads, smem, stream>>>(p);
  HETPLAN_CHECK_LAUNCH();
}

template <class T, int kD>
void backward_ws_drift(const AttentionParams<T>& p, cudaStream_t stream) {
  const size_t smem = attention_backward_hopper_ws_drift_smem_bytes<T, kD>();
  allow_dynamic_smem(
      reinterpret_cast<const void*>(&attention_backward_hopper_ws_drift_kernel<T, kD>), smem);
  const dim3 grid(static_cast<unsigned>(ceil_div(p.seq, kHopperTile)), p.heads, p.batch);
  attention_backward_hopper_ws_drift_kernel<T, kD><<<grid, kHopperWsThreads, smem, stream>>>(p);
  HETPLAN_CHECK_LAUNCH();
}

}  // namespace

template <class T>
void attention_forward_hopper(const AttentionParams<T>& p, int head_dim, cudaStream_t stream) {
  if (head_dim == 64)
    forward_dispatch<T, 64>(p, stream);
  else
    forward_dispatch<T, 128>(p, stream);
}

template <class T>
void attention_backward_hopper(const AttentionParams<T>& p, int head_dim, cudaStream_t stream) {
  if (head_dim == 64 && ws_backward() == WsBackward::kDrift)
    backward_ws_drift<T, 64>(p, stream);
  else if (head_dim == 64 && ws_backward() == WsBackward::kOneWarpgroup)
    backward<T, 64, false, 1>(p, stream);
  else if (head_dim == 64)
    backward<T, 64>(p, stream);
  else if (ws_backward() == WsBackward::kDrift)
    backward_ws_drift<T, 128>(p, stream);
  else if (ws_backward() == WsBackward::kOneWarpgroup)
    backward<T, 128, false, 1>(p, stream);
  else if (ws_backward() == WsBackward::kBulk)
    backward_ws<T, 128, true>(p, stream);
  else if (ws_backward() == WsBackward::kCpAsync)
    backward_ws<T, 128, false>(p, stream);
  else if (ws_backward() == WsBackward::kDqWriter)
    backward_ws<T, 128, true, true>(p, stream);
  else if (bulk_dq())
    backward<T, 128, true>(p, stream);
  else
    backward<T, 128>(p, stream);
}

template void attention_forward_hopper<bf16>(const AttentionParams<bf16>&, int, cudaStream_t);
template void attention_forward_hopper<fp16>(const AttentionParams<fp16>&, int, cudaStream_t);
template void attention_backward_hopper<bf16>(const AttentionParams<bf16>&, int, cudaStream_t);
template void attention_backward_hopper<fp16>(const AttentionParams<fp16>&, int, cudaStream_t);

// sm_90a code runs on compute capability 9.0 exactly.
bool hopper_attention_available() {
  int device = 0, major = 0, minor = 0;
  HETPLAN_CUDA_CHECK(cudaGetDevice(&device));
  HETPLAN_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  HETPLAN_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major == 9 && minor == 0;
}

}  // namespace hetplan::kernels
