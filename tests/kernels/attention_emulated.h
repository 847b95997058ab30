// One check for every flash attention kernel family run under the CPU emulator (the portable
// mma.sync kernels and the Hopper wgmma ones): random inputs, poisoned outputs, forward against
// the double-precision reference, then the backward from the kernel's own o and lse, and the
// errors printed (they set the bounds here and in the GPU tests).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <tuple>
#include <vector>

#include "kernels/attention_kernels.h"
#include "kernels/reference/attention_reference.h"
#include "tests/kernels/emulated.h"

namespace hetplan::kernels::testing {

// Bounds for bf16 operands (METHOD.md: 1e-3..1e-2); measured under emulation, which rounds P and
// dS to bf16 exactly as the kernels do: forward ~3e-3, backward ~5e-3 (see the test output).
constexpr Tolerance kAttentionBf16{1e-2, 8e-2};
constexpr Tolerance kAttentionFp16{2e-3, 2e-2};

struct AttentionCase {
  int batch = 1, heads = 1, seq = 1;
  bool causal = false, bshd = true;
  uint64_t schedule = 0;  // nonzero: warps alone between barriers in shuffled order
  bool eager = false;     // asynchronous copies land at issue
  uint64_t seed = 101;    // q, k, v and dout take seed, seed + 1, seed + 2, seed + 3
};

// How a kernel family is launched: the query tile and block size of its grid, its shared memory,
// and the per-thread bodies of its forward and main backward kernels (the preprocess and dq
// conversion kernels are common to both families).
template <class T>
struct AttentionFamily {
  int tile = 0, threads = 0;
  int backward_tile = 0;     // keys per backward block; 0: tile
  int backward_threads = 0;  // 0: threads
  int64_t forward_smem = 0, backward_smem = 0;
  void (*forward)(const AttentionParams<T>&) = nullptr;
  void (*backward)(const AttentionParams<T>&) = nullptr;
};

template <class T, int kD>
void check_attention_family(const AttentionFamily<T>& f, const AttentionCase& c) {
  SCOPED_TRACE(::testing::Message()
               << "b " << c.batch << " h " << c.heads << " s " << c.seq << " d " << kD
               << (c.causal ? " causal" : " full") << (c.bshd ? " bshd" : " bhsd"));
  const int64_t rows = int64_t{c.batch} * c.heads * c.seq, n = rows * kD;
  const auto q = random_vector<T>(n, -2.0f, 2.0f, c.seed),
             k = random_vector<T>(n, -2.0f, 2.0f, c.seed + 1),
             v = random_vector<T>(n, -1.0f, 1.0f, c.seed + 2),
             dout = random_vector<T>(n, -1.0f, 1.0f, c.seed + 3);
  auto o = poisoned<T>(n), dq = poisoned<T>(n), dk = poisoned<T>(n), dv = poisoned<T>(n);
  std::vector<float> lse(static_cast<size_t>(rows), NAN), dvec(static_cast<size_t>(rows), NAN),
      dq_accum(static_cast<size_t>(n), NAN);
  emu::GlobalScope scope;
  for (const auto* t : {&q, &k, &v, &dout}) scope.add(t->data(), t->size());
  for (auto* t : {&o, &dq, &dk, &dv}) scope.add(t->data(), t->size());
  for (auto* t : {&lse, &dvec, &dq_accum}) scope.add(t->data(), t->size());

  const float scale = 1.0f / std::sqrt(static_cast<float>(kD));
  AttentionParams<T> p = attention_params<T>(c.batch, c.heads, c.seq, kD, c.causal, scale, c.bshd);
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.o = o.data();
  p.dout = dout.data();
  p.out = o.data();
  p.dq = dq.data();
  p.dk = dk.data();
  p.dv = dv.data();
  p.lse = lse.data();
  p.dvec = dvec.data();
  p.dq_accum = dq_accum.data();

  LaunchShape tiles;
  tiles.grid_x = ceil_div(c.seq, f.tile);
  tiles.grid_y = c.heads;
  tiles.grid_z = c.batch;
  tiles.block = f.threads;
  tiles.smem = f.forward_smem;
  emulate(
      tiles, [&] { f.forward(p); }, c.schedule, c.eager);

  const ref::AttentionDims dims{c.batch, c.heads, c.seq, kD, c.causal, scale, c.bshd};
  const auto qf = to_floats(q), kf = to_floats(k), vf = to_floats(v), df = to_floats(dout);
  std::vector<double> o_ref(static_cast<size_t>(n)), lse_ref(static_cast<size_t>(rows));
  ref::attention_forward(qf, kf, vf, dims, o_ref, lse_ref);
  const Tolerance tol = std::is_same_v<T, bf16> ? kAttentionBf16 : kAttentionFp16;
  expect_close("o", o, o_ref, tol);
  expect_close("lse", lse, lse_ref, {1e-5, 1e-4});

  const LaunchShape pre = attention_rows_shape(rows, kD);
  emulate(pre, [&] { attention_preprocess_block<T, kD>(p); });
  tiles.smem = f.backward_smem;
  if (f.backward_tile != 0) tiles.grid_x = ceil_div(c.seq, f.backward_tile);
  if (f.backward_threads != 0) tiles.block = f.backward_threads;
  emulate(
      tiles, [&] { f.backward(p); }, c.schedule, c.eager);
  emulate(pre, [&] { attention_dq_convert_block<T, kD>(p); });

  std::vector<double> dq_ref(static_cast<size_t>(n)), dk_ref(static_cast<size_t>(n)),
      dv_ref(static_cast<size_t>(n));
  ref::attention_backward(qf, kf, vf, to_floats(o), df, lse, dims, dq_ref, dk_ref, dv_ref);
  expect_close("dq", dq, dq_ref, tol);
  expect_close("dk", dk, dk_ref, tol);
  expect_close("dv", dv, dv_ref, tol);
  for (const auto& [name, got, want] : {std::tuple{"o", &o, &o_ref},
                                        {"dq", &dq, &dq_ref},
                                        {"dk", &dk, &dk_ref},
                                        {"dv", &dv, &dv_ref}}) {
    const Comparison cmp = compare(name, to_floats(*got), *want, {1, 1});
    std::printf("    %s: rel_l2 %.2e elementwise %.2e\n", name, cmp.rel_l2, cmp.elementwise);
  }
}

}  // namespace hetplan::kernels::testing
