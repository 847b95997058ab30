// Attention: CUDA entry points and launchers of attention_kernels.h (forward, which explains the
// algorithm and fragment layouts) and attention_backward_kernels.h (backward); reference in
// reference/attention_reference.h.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "kernels/attention.h"
#include "kernels/attention_backward_kernels.h"
#include "kernels/attention_kernels.h"
#include "kernels/cuda_check.h"
#if defined(HETPLAN_HOPPER_ATTENTION)
#include "kernels/experimental/attention_hopper.h"
#endif

namespace hetplan::kernels {
namespace {

// Blocks per SM the register budget is set for: 255 registers at 2 blocks of 128 threads.
constexpr int forward_min_blocks(int d) { return d == 64 ? 3 : 2; }
constexpr int backward_min_blocks(int d) { return d == 64 ? 3 : 2; }

template <class T, int kD>
__global__ void __launch_bounds__(kAttnThreads, forward_min_blocks(kD))
    attention_forward_kernel(AttentionParams<T> p) {
  attention_forward_block<T, kD>(p);
}
template <class T, int kD>
__global__ void __launch_bounds__(kAttnThreads, backward_min_blocks(kD))
    attention_backward_kernel(AttentionParams<T> p) {
  attention_backward_block<T, kD>(p);
}
template <class T, int kD>
__global__ void __launch_bounds__(256) attention_preprocess_kernel(AttentionParams<T> p) {
  attention_preprocess_block<T, kD>(p);
}
template <class T, int kD>
__global__ void __launch_bounds__(256) attention_dq_convert_kernel(AttentionParams<T> p) {
  attention_dq_convert_block<T, kD>(p);
}

int64_t align256(int64_t bytes) { return round_up(bytes, 256); }

void check_shape(const AttentionShape& s, DType dtype) {
  if (s.batch < 1 || s.heads < 1 || s.seq < 1)
    throw std::invalid_argument("attention: batch, heads and seq must be positive");
  if (s.batch > 65535 || s.heads > 65535) throw std::invalid_argument("attention: grid too large");
  const std::string why = attention_support(dtype, s.head_dim);
  if (!why.empty()) throw std::invalid_argument("attention: " + why);
}

template <class T>
AttentionParams<T> params_of(const AttentionShape& s) {
  return attention_params<T>(s.batch, s.heads, s.seq, s.head_dim, s.causal, s.softmax_scale(),
                             s.layout == AttentionLayout::kBSHD);
}

void check_aligned(std::initializer_list<const void*> pointers) {
  for (const void* ptr : pointers)
    if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0)
      throw std::invalid_argument("attention: tensors must be 16-byte aligned");
}

#if defined(HETPLAN_HOPPER_ATTENTION)
// With the experimental kernels (HETPLAN_EXPERIMENTAL_KERNELS), which ones run on compute
// capability 9.0, per head_dim and pass: whichever was faster on the H100 (docs/benchmarks.md):
// wgmma everywhere except the d = 64 backward, where the mma.sync kernel is faster.
// HETPLAN_ATTENTION_KERNEL=mma forces the mma.sync kernels and =wgmma the wgmma ones (for
// comparison).
enum class KernelChoice { kMeasured, kMma, kWgmma };
KernelChoice kernel_choice() {
  static const KernelChoice choice = [] {
    const char* v = std::getenv("HETPLAN_ATTENTION_KERNEL");
    if (v != nullptr && std::strcmp(v, "mma") == 0) return KernelChoice::kMma;
    if (v != nullptr && std::strcmp(v, "wgmma") == 0) return KernelChoice::kWgmma;
    return KernelChoice::kMeasured;
  }();
  return choice;
}
bool use_hopper(int head_dim, bool backward) {
  const KernelChoice c = kernel_choice();
  if (c == KernelChoice::kMma || !hopper_attention_available()) return false;
  return c == KernelChoice::kWgmma || !(backward && head_dim == 64);
}
#endif

template <class T, int kD>
void launch_forward(const AttentionParams<T>& p, cudaStream_t stream) {
#if defined(HETPLAN_HOPPER_ATTENTION)
  if (use_hopper(kD, false)) return attention_forward_hopper<T>(p, kD, stream);
#endif
  const size_t smem = attention_forward_smem_bytes<T, kD>();
  allow_dynamic_smem(reinterpret_cast<const void*>(&attention_forward_kernel<T, kD>), smem);
  const dim3 grid(static_cast<unsigned>(ceil_div(p.seq, kAttnTile)), p.heads, p.batch);
  attention_forward_kernel<T, kD><<<grid, kAttnThreads, smem, stream>>>(p);
  HETPLAN_CHECK_LAUNCH();
}

template <class T, int kD>
void launch_backward(const AttentionParams<T>& p, cudaStream_t stream) {
  const int64_t rows = int64_t{p.batch} * p.seq * p.heads;
  const LaunchShape pre = attention_rows_shape(rows, kD);
  attention_preprocess_kernel<T, kD><<<grid_of(pre), pre.block, 0, stream>>>(p);
  HETPLAN_CHECK_LAUNCH();
  bool hopper = false;
#if defined(HETPLAN_HOPPER_ATTENTION)
  hopper = use_hopper(kD, true);
  if (hopper) attention_backward_hopper<T>(p, kD, stream);
#endif
  if (!hopper) {
    const size_t smem = attention_backward_smem_bytes<T, kD>();
    allow_dynamic_smem(reinterpret_cast<const void*>(&attention_backward_kernel<T, kD>), smem);
    const dim3 grid(static_cast<unsigned>(ceil_div(p.seq, kAttnTile)), p.heads, p.batch);
    attention_backward_kernel<T, kD><<<grid, kAttnThreads, smem, stream>>>(p);
    HETPLAN_CHECK_LAUNCH();
  }
  attention_dq_convert_kernel<T, kD><<<grid_of(pre), pre.block, 0, stream>>>(p);
  HETPLAN_CHECK_LAUNCH();
}

}  // namespace

#if !defined(HETPLAN_HOPPER_ATTENTION)
bool hopper_attention_available() { return false; }  // the experimental kernels were not built
#endif

float AttentionShape::softmax_scale() const {
  return scale != 0.0f ? scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
}

std::string attention_support(DType dtype, int head_dim) {
  if (dtype == DType::kF32) return "fp32 attention is not implemented (bf16 or fp16)";
  if (head_dim != 64 && head_dim != 128) return "head_dim must be 64 or 128";
  int device = 0, major = 0, minor = 0, smem_optin = 0;
  HETPLAN_CUDA_CHECK(cudaGetDevice(&device));
  HETPLAN_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  HETPLAN_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  HETPLAN_CUDA_CHECK(
      cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (major < 7 || (major == 7 && minor < 5)) return "needs sm_75 or newer";
  if (dtype == DType::kBF16 && major < 8) return "bf16 needs sm_80 or newer; use fp16 on sm_75";
  const size_t need = head_dim == 64 ? attention_backward_smem_bytes<bf16, 64>()
                                     : attention_backward_smem_bytes<bf16, 128>();
  if (need > static_cast<size_t>(smem_optin))
    return "head_dim " + std::to_string(head_dim) + " needs " + std::to_string(need) +
           " bytes of shared memory per block, the device allows " + std::to_string(smem_optin);
  return "";
}

template <class T>
void attention_forward(const T* q, const T* k, const T* v, T* o, float* lse,
                       const AttentionShape& shape, cudaStream_t stream) {
  check_shape(shape, dtype_of<T>());
  check_aligned({q, k, v, o});
  AttentionParams<T> p = params_of<T>(shape);
  p.q = q;
  p.k = k;
  p.v = v;
  p.out = o;
  p.lse = lse;
  if (shape.head_dim == 64)
    launch_forward<T, 64>(p, stream);
  else
    launch_forward<T, 128>(p, stream);
}

size_t attention_backward_workspace_bytes(const AttentionShape& s) {
  const int64_t rows = int64_t{s.batch} * s.seq * s.heads;
  return static_cast<size_t>(align256(rows * s.head_dim * 4) + align256(rows * 4));
}

template <class T>
void attention_backward(const T* q, const T* k, const T* v, const T* o, const T* dout,
                        const float* lse, T* dq, T* dk, T* dv, const AttentionShape& shape,
                        void* workspace, cudaStream_t stream) {
  check_shape(shape, dtype_of<T>());
  check_aligned({q, k, v, o, dout, dq, dk, dv, workspace});
  AttentionParams<T> p = params_of<T>(shape);
  p.q = q;
  p.k = k;
  p.v = v;
  p.o = o;
  p.dout = dout;
  p.dq = dq;
  p.dk = dk;
  p.dv = dv;
  p.lse = const_cast<float*>(lse);
  const int64_t rows = int64_t{shape.batch} * shape.seq * shape.heads;
  p.dq_accum = static_cast<float*>(workspace);
  p.dvec = reinterpret_cast<float*>(static_cast<unsigned char*>(workspace) +
                                    align256(rows * shape.head_dim * 4));
  if (shape.head_dim == 64)
    launch_backward<T, 64>(p, stream);
  else
    launch_backward<T, 128>(p, stream);
}

double attention_forward_flops(const AttentionShape& s) {
  const double full = 4.0 * s.batch * s.heads * static_cast<double>(s.seq) * s.seq * s.head_dim;
  return s.causal ? full / 2 : full;
}
double attention_backward_flops(const AttentionShape& s) {
  return 2.5 * attention_forward_flops(s);
}

template void attention_forward<bf16>(const bf16*, const bf16*, const bf16*, bf16*, float*,
                                      const AttentionShape&, cudaStream_t);
template void attention_forward<fp16>(const fp16*, const fp16*, const fp16*, fp16*, float*,
                                      const AttentionShape&, cudaStream_t);
template void attention_backward<bf16>(const bf16*, const bf16*, const bf16*, const bf16*,
                                       const bf16*, const float*, bf16*, bf16*, bf16*,
                                       const AttentionShape&, void*, cudaStream_t);
template void attention_backward<fp16>(const fp16*, const fp16*, const fp16*, const fp16*,
                                       const fp16*, const float*, fp16*, fp16*, fp16*,
                                       const AttentionShape&, void*, cudaStream_t);

}  // namespace hetplan::kernels
