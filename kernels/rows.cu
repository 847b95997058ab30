// Cross-entropy, embedding and rotary: CUDA entry points and launchers of rows_kernels.h (which
// says what is computed and how); references in reference/rows_reference.h.
#include <cub/device/device_radix_sort.cuh>

#include <cmath>

#include "kernels/cuda_check.h"
#include "kernels/rows.h"
#include "kernels/rows_kernels.h"

namespace hetplan::kernels {
namespace {

template <class T, int kVec>
__global__ void __launch_bounds__(512) cross_entropy_forward_kernel(CrossEntropyArgs<T> a) {
  cross_entropy_forward_block<T, kVec>(a);
}
template <class T, int kVec>
__global__ void __launch_bounds__(512) cross_entropy_backward_kernel(CrossEntropyArgs<T> a) {
  cross_entropy_backward_block<T, kVec>(a);
}
template <class T, int kVec>
__global__ void __launch_bounds__(256) embedding_forward_kernel(EmbeddingArgs<T> a) {
  embedding_forward_block<T, kVec>(a);
}
template <class T, int kVec>
__global__ void __launch_bounds__(256) embedding_backward_kernel(EmbeddingBackwardArgs<T> a) {
  embedding_backward_block<T, kVec>(a);
}
__global__ void iota_kernel(int32_t* p, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    p[i] = static_cast<int32_t>(i);
}
template <class T, int kVec>
__global__ void __launch_bounds__(256) rotary_kernel(RotaryArgs<T> a) {
  rotary_block<T, kVec>(a);
}
__global__ void rotary_tables_kernel(float* cos, float* sin, int seq, int half, float base) {
  const int64_t n = int64_t{seq} * half;
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < n;
       k += int64_t{gridDim.x} * blockDim.x) {
    const int64_t p = k / half;
    const int i = static_cast<int>(k % half);
    // Double precision: angles reach seq radians, where fp32 sin/cos lose digits. In units of
    // pi, reduced to [0, 2), so sincospi needs no slow argument reduction.
    double turns = static_cast<double>(p) *
                   pow(static_cast<double>(base), -static_cast<double>(i) / half) / M_PI;
    turns -= 2.0 * floor(turns / 2.0);
    double s = 0, c = 0;
    sincospi(turns, &s, &c);
    cos[k] = static_cast<float>(c);
    sin[k] = static_cast<float>(s);
  }
}

int key_bits(int64_t vocab) {
  int bits = 1;
  while (bits < 31 && (int64_t{1} << bits) < vocab) ++bits;
  return bits;
}

size_t sort_temp_bytes(int64_t tokens, int64_t vocab) {
  size_t bytes = 0;
  HETPLAN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
      static_cast<int>(tokens), 0, key_bits(vocab)));
  return bytes;
}

int64_t align256(int64_t bytes) { return round_up(bytes, 256); }

}  // namespace

template <class T>
void cross_entropy_forward(const T* logits, const int32_t* labels, float* loss, float* lse,
                           int64_t tokens, int64_t vocab, cudaStream_t stream) {
  if (tokens <= 0) return;
  if (vocab <= 0) throw std::invalid_argument("cross_entropy: vocab must be positive");
  const CrossEntropyArgs<T> a{logits, labels, loss, lse, nullptr, nullptr, tokens, vocab};
  const int vec = row_vector_width<T>(0, {logits});
  const LaunchShape s = row_block_shape(tokens, vocab, vec);
  if (vec == 1)
    cross_entropy_forward_kernel<T, 1><<<grid_of(s), s.block, s.smem, stream>>>(a);
  else
    cross_entropy_forward_kernel<T, vec16<T>()><<<grid_of(s), s.block, s.smem, stream>>>(a);
  HETPLAN_CHECK_LAUNCH();
}

template <class T>
void cross_entropy_backward(const T* logits, const int32_t* labels, const float* lse,
                            const float* dloss, T* dlogits, int64_t tokens, int64_t vocab,
                            cudaStream_t stream) {
  if (tokens <= 0) return;
  if (vocab <= 0) throw std::invalid_argument("cross_entropy: vocab must be positive");
  const CrossEntropyArgs<T> a{logits, labels,  nullptr, const_cast<float*>(lse),
                              dloss,  dlogits, tokens,  vocab};
  const int vec = row_vector_width<T>(0, {logits, dlogits});
  const LaunchShape s = row_block_shape(tokens, vocab, vec);
  if (vec == 1)
    cross_entropy_backward_kernel<T, 1><<<grid_of(s), s.block, 0, stream>>>(a);
  else
    cross_entropy_backward_kernel<T, vec16<T>()><<<grid_of(s), s.block, 0, stream>>>(a);
  HETPLAN_CHECK_LAUNCH();
}

template <class T>
void embedding_forward(const int32_t* ids, const T* weight, T* out, int64_t tokens, int hidden,
                       cudaStream_t stream) {
  if (tokens <= 0 || hidden <= 0) return;
  const EmbeddingArgs<T> a{ids, weight, out, tokens, hidden};
  const int vec = row_vector_width<T>(hidden, {weight, out});
  LaunchShape s;
  s.block = static_cast<int>(std::clamp<int64_t>(round_up(ceil_div(hidden, vec), 32), 32, 256));
  s.grid_x = std::min<int64_t>(tokens, int64_t{sm_count()} * (2048 / s.block));
  if (vec == 1)
    embedding_forward_kernel<T, 1><<<grid_of(s), s.block, 0, stream>>>(a);
  else
    embedding_forward_kernel<T, vec16<T>()><<<grid_of(s), s.block, 0, stream>>>(a);
  HETPLAN_CHECK_LAUNCH();
}

size_t embedding_backward_workspace_bytes(int64_t tokens, int64_t vocab) {
  return static_cast<size_t>(3 * align256(tokens * 4)) + sort_temp_bytes(tokens, vocab);
}

template <class T>
void embedding_backward(const int32_t* ids, const T* dout, float* dweight, int64_t tokens,
                        int64_t vocab, int hidden, void* workspace, size_t workspace_bytes,
                        cudaStream_t stream) {
  if (tokens <= 0 || hidden <= 0) return;
  if (tokens > INT32_MAX) throw std::invalid_argument("embedding_backward: too many tokens");
  if (workspace_bytes < embedding_backward_workspace_bytes(tokens, vocab))
    throw std::invalid_argument("embedding_backward: workspace too small");
  auto* base = static_cast<unsigned char*>(workspace);
  auto* token_index = reinterpret_cast<int32_t*>(base);
  auto* sorted_ids = reinterpret_cast<int32_t*>(base + align256(tokens * 4));
  auto* sorted_tokens = reinterpret_cast<int32_t*>(base + 2 * align256(tokens * 4));
  void* temp = base + 3 * align256(tokens * 4);
  size_t temp_bytes = workspace_bytes - static_cast<size_t>(3 * align256(tokens * 4));
  iota_kernel<<<static_cast<unsigned>(std::min<int64_t>(ceil_div(tokens, 256), 1024)), 256, 0,
                stream>>>(token_index, tokens);
  HETPLAN_CHECK_LAUNCH();
  HETPLAN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, temp_bytes, ids, sorted_ids, token_index,
                                                     sorted_tokens, static_cast<int>(tokens), 0,
                                                     key_bits(vocab), stream));
  const EmbeddingBackwardArgs<T> a{sorted_ids, sorted_tokens, dout, dweight, tokens, hidden};
  const int vec = row_vector_width<T>(hidden, {dout, dweight});
  const LaunchShape s = embedding_backward_shape(tokens, hidden, vec);
  if (vec == 1)
    embedding_backward_kernel<T, 1><<<grid_of(s), s.block, 0, stream>>>(a);
  else
    embedding_backward_kernel<T, vec16<T>()><<<grid_of(s), s.block, 0, stream>>>(a);
  HETPLAN_CHECK_LAUNCH();
}

void rotary_tables(float* cos, float* sin, int seq, int head_dim, float base, cudaStream_t stream) {
  if (seq <= 0) return;
  if (head_dim <= 0 || head_dim % 2) throw std::invalid_argument("rotary: head_dim must be even");
  const int64_t n = int64_t{seq} * (head_dim / 2);
  rotary_tables_kernel<<<static_cast<unsigned>(std::min<int64_t>(ceil_div(n, 256), 4096)), 256, 0,
                         stream>>>(cos, sin, seq, head_dim / 2, base);
  HETPLAN_CHECK_LAUNCH();
}

template <class T>
void launch_rotary(const RotaryArgs<T>& a, cudaStream_t stream) {
  if (a.tokens <= 0 || a.heads <= 0) return;
  if (a.head_dim <= 0 || a.head_dim % 2 || a.seq <= 0)
    throw std::invalid_argument("rotary: head_dim must be even and seq positive");
  const int half = a.head_dim / 2;
  const bool vector = half % vec16<T>() == 0 && a.x_token_stride % vec16<T>() == 0 &&
                      row_vector_width<T>(0, {a.x, a.y}) > 1 &&
                      row_vector_width<float>(half, {a.cos, a.sin}) > 1 && vec16<T>() % 4 == 0;
  const int vec = vector ? vec16<T>() : 1;
  LaunchShape s;
  s.block = 256;
  s.grid_x = grid_stride_blocks(a.tokens * a.heads * (half / vec), 256, sm_count(), 8);
  if (vec == 1)
    rotary_kernel<T, 1><<<grid_of(s), s.block, 0, stream>>>(a);
  else
    rotary_kernel<T, vec16<T>()><<<grid_of(s), s.block, 0, stream>>>(a);
  HETPLAN_CHECK_LAUNCH();
}

template <class T>
void rotary_forward(const T* x, T* y, const float* cos, const float* sin, int64_t tokens, int heads,
                    int head_dim, int seq, cudaStream_t stream, int64_t x_token_stride) {
  if (x_token_stride != 0 && x_token_stride < int64_t{heads} * head_dim)
    throw std::invalid_argument("rotary: token stride " + std::to_string(x_token_stride) +
                                " is less than heads x head_dim");
  if (x_token_stride != 0 && x == y)
    throw std::invalid_argument("rotary: in place needs a contiguous x");
  launch_rotary<T>({x, y, cos, sin, tokens, heads, head_dim, seq, 1.0f, x_token_stride}, stream);
}

template <class T>
void rotary_backward(const T* dy, T* dx, const float* cos, const float* sin, int64_t tokens,
                     int heads, int head_dim, int seq, cudaStream_t stream) {
  launch_rotary<T>({dy, dx, cos, sin, tokens, heads, head_dim, seq, -1.0f}, stream);
}

#define HETPLAN_ROWS(T)                                                                         \
  template void cross_entropy_forward<T>(const T*, const int32_t*, float*, float*, int64_t,     \
                                         int64_t, cudaStream_t);                                \
  template void cross_entropy_backward<T>(const T*, const int32_t*, const float*, const float*, \
                                          T*, int64_t, int64_t, cudaStream_t);                  \
  template void embedding_forward<T>(const int32_t*, const T*, T*, int64_t, int, cudaStream_t); \
  template void embedding_backward<T>(const int32_t*, const T*, float*, int64_t, int64_t, int,  \
                                      void*, size_t, cudaStream_t);                             \
  template void rotary_forward<T>(const T*, T*, const float*, const float*, int64_t, int, int,  \
                                  int, cudaStream_t, int64_t);                                  \
  template void rotary_backward<T>(const T*, T*, const float*, const float*, int64_t, int, int, \
                                   int, cudaStream_t);
HETPLAN_ROWS(float)
HETPLAN_ROWS(bf16)
#undef HETPLAN_ROWS

}  // namespace hetplan::kernels
