// The device buffers of one set of a TransformerBlock (profiler/layer/block.h): parameters, the
// activations F keeps for B and W, temporaries and gradients, each in its own arena. Internal to
// block.cpp; separate so that the passes read on their own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/dtype.h"
#include "profiler/layer/arena.h"
#include "profiler/layer/block.h"

namespace hetplan::profiler::block_detail {

namespace K = ::hetplan::kernels;

// A tensor inside one of a set's arenas.
struct Tensor {
  DeviceArena* arena = nullptr;
  size_t offset = 0;
  int64_t count = 0;
  Dtype dtype = Dtype::kBf16;
  std::string name;

  void* p() const { return arena->at(offset); }
  K::bf16* b() const { return static_cast<K::bf16*>(p()); }
  float* f() const { return static_cast<float*>(p()); }
  size_t bytes() const { return static_cast<size_t>(count) * dtype_bytes(dtype); }
};

// One set: parameters, the activations F keeps for B and W, and everything else.
struct Set {
  DeviceArena params, saved, work;
  // Parameters ([out, in] row-major weights; biases and norm weights [features]).
  Tensor wqkv, wo, w1, w2, bqkv, bo, b1, b2, g1, be1, g2, be2;
  // Saved for backward.
  Tensor x, mean1, rstd1, y1, q, k, v, o, lse, x2, mean2, rstd2, y2, u, a;
  // Forward temporaries and the forward output.
  Tensor qkv, proj, z, out;
  // Backward (B): activation gradients; dout is the incoming gradient.
  Tensor dout, dz, da, du, dy2, dx2a, dx2, dproj, d_o, dq, dk, dv, dqkv, dy1, dx1, dx;
  // Weight gradients (W), fp32 for biases and norm weights as frameworks keep them.
  Tensor dwqkv, dwo, dw1, dw2, dbqkv, dbo, db1, db2, dg1, dbe1, dg2, dbe2;
  Tensor norm_ws, attn_ws;
  std::vector<Tensor*> f_outputs, b_outputs, w_outputs;
  int64_t saved_memgetinfo = 0;
};

// Lays a set out in its three arenas (no allocation yet).
void layout(Set& s, const BlockDims& d);

// The attention kernels' shape for one rank's block ([batch, seq, heads, head_dim] tensors).
K::AttentionShape attention_shape(const BlockDims& d);

}  // namespace hetplan::profiler::block_detail
