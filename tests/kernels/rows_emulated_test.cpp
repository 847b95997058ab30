// Cross-entropy, embedding and rotary kernels under the CPU emulator against the references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/reference/rows_reference.h"
#include "kernels/rows_kernels.h"
#include "tests/kernels/emulated.h"

namespace hetplan::kernels {
namespace {

using testing::emulate;
using testing::expect_close;
using testing::poisoned;

template <class T>
void check_cross_entropy(int64_t tokens, int64_t vocab) {
  SCOPED_TRACE(::testing::Message() << tokens << "x" << vocab);
  // Logits of a trained model's spread; one very large logit to test the online max.
  auto logits = random_vector<T>(tokens * vocab, -8.0f, 8.0f, 71);
  logits[static_cast<size_t>(vocab + 5)] = from_float<T>(60.0f);
  auto labels = random_ints(tokens, 0, static_cast<int32_t>(vocab), 72);
  labels[1] = -100;  // ignored
  const auto dloss = random_vector<float>(tokens, 0.5f, 1.5f, 73);
  std::vector<float> loss(static_cast<size_t>(tokens), NAN), lse(static_cast<size_t>(tokens), NAN);
  auto dlogits = poisoned<T>(tokens * vocab);
  emu::GlobalScope scope;
  scope.add(logits.data(), logits.size());
  scope.add(dlogits.data(), dlogits.size());
  const CrossEntropyArgs<T> a{logits.data(), labels.data(),  loss.data(), lse.data(),
                              dloss.data(),  dlogits.data(), tokens,      vocab};
  const int vec = row_vector_width<T>(0, {logits.data(), dlogits.data()});
  const LaunchShape s = row_block_shape(tokens, vocab, vec);
  emulate(s, [&] {
    if (vec == 1)
      cross_entropy_forward_block<T, 1>(a);
    else
      cross_entropy_forward_block<T, vec16<T>()>(a);
  });
  emulate(s, [&] {
    if (vec == 1)
      cross_entropy_backward_block<T, 1>(a);
    else
      cross_entropy_backward_block<T, vec16<T>()>(a);
  });
  std::vector<double> loss_ref(loss.size()), lse_ref(lse.size()), dlogits_ref(dlogits.size());
  const auto lf = to_floats(logits);
  ref::cross_entropy_forward(lf, labels, tokens, vocab, loss_ref, lse_ref);
  ref::cross_entropy_backward(lf, labels, lse, dloss, tokens, vocab, dlogits_ref);
  expect_close("lse", lse, lse_ref, {1e-6, 1e-5});
  expect_close("loss", loss, loss_ref, {1e-5, 1e-4});
  expect_close("dlogits", dlogits, dlogits_ref);
  EXPECT_EQ(loss[1], 0.0f);
}

// vocab 1003 bf16: rows start at every alignment, so heads, vectors and tails all occur.
TEST(RowsEmulated, CrossEntropyBf16OddVocab) { check_cross_entropy<bf16>(9, 1003); }
TEST(RowsEmulated, CrossEntropyFp32) { check_cross_entropy<float>(4, 2048); }
TEST(RowsEmulated, CrossEntropyTinyVocab) { check_cross_entropy<bf16>(3, 5); }

template <class T>
void check_embedding(int64_t tokens, int64_t vocab, int hidden) {
  SCOPED_TRACE(::testing::Message()
               << tokens << " tokens, vocab " << vocab << ", hidden " << hidden);
  const auto weight = random_vector<T>(vocab * hidden, -1.0f, 1.0f, 81);
  // Few distinct ids, so runs of equal ids are long.
  const auto ids = random_ints(tokens, 0, static_cast<int32_t>(vocab), 82);
  const auto dout = random_vector<T>(tokens * hidden, -1.0f, 1.0f, 83);
  auto dweight = random_vector<float>(vocab * hidden, -0.1f, 0.1f, 84);
  std::vector<double> dweight_ref(dweight.begin(), dweight.end());
  auto out = poisoned<T>(tokens * hidden);
  emu::GlobalScope scope;
  scope.add(weight.data(), weight.size());
  scope.add(dout.data(), dout.size());
  scope.add(dweight.data(), dweight.size());
  scope.add(out.data(), out.size());
  const int vec = row_vector_width<T>(hidden, {weight.data(), out.data(), dout.data()});
  const EmbeddingArgs<T> f{ids.data(), weight.data(), out.data(), tokens, hidden};
  emulate({std::min<int64_t>(tokens, 3), 1, 1, 64, 0}, [&] {
    if (vec == 1)
      embedding_forward_block<T, 1>(f);
    else
      embedding_forward_block<T, vec16<T>()>(f);
  });
  // The launcher's CUB sort, done on the host: stable by id.
  std::vector<int32_t> order(static_cast<size_t>(tokens));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return ids[a] < ids[b]; });
  std::vector<int32_t> sorted_ids(order.size());
  for (size_t i = 0; i < order.size(); ++i) sorted_ids[i] = ids[static_cast<size_t>(order[i])];
  const EmbeddingBackwardArgs<T> b{sorted_ids.data(), order.data(), dout.data(),
                                   dweight.data(),    tokens,       hidden};
  emulate(embedding_backward_shape(tokens, hidden, vec), [&] {
    if (vec == 1)
      embedding_backward_block<T, 1>(b);
    else
      embedding_backward_block<T, vec16<T>()>(b);
  });
  std::vector<double> out_ref(out.size());
  ref::embedding_forward(ids, to_floats(weight), tokens, hidden, out_ref);
  ref::embedding_backward(ids, to_floats(dout), tokens, hidden, dweight_ref);
  expect_close("out", out, out_ref, {0, 0});  // a copy: exact
  expect_close("dweight", dweight, dweight_ref, {1e-6, 1e-5});
}

TEST(RowsEmulated, EmbeddingBf16) { check_embedding<bf16>(50, 7, 64); }
TEST(RowsEmulated, EmbeddingFp32OddHidden) { check_embedding<float>(20, 30, 37); }
// hidden wider than one block's columns: several column blocks per run.
TEST(RowsEmulated, EmbeddingBf16WideRows) { check_embedding<bf16>(6, 4, 8 * 256 + 16); }

template <class T>
void check_rotary(int64_t tokens, int heads, int head_dim, int seq, int64_t x_token_stride = 0) {
  SCOPED_TRACE(::testing::Message() << tokens << " tokens, " << heads << " heads, d " << head_dim
                                    << ", x token stride " << x_token_stride);
  const int half = head_dim / 2;
  std::vector<double> cd(static_cast<size_t>(seq * half)), sd(cd.size());
  ref::rotary_tables(seq, head_dim, 10000.0, cd, sd);
  const std::vector<float> cos(cd.begin(), cd.end()), sin(sd.begin(), sd.end());
  // x: the Q (or K) part of each token's row when strided (the rest is other heads' data).
  const int64_t row = int64_t{heads} * head_dim, stride = x_token_stride ? x_token_stride : row;
  const auto xs = random_vector<T>(tokens * stride, -2.0f, 2.0f, 91);
  std::vector<T> x;  // x gathered contiguous, for the references
  for (int64_t t = 0; t < tokens; ++t)
    x.insert(x.end(), xs.begin() + t * stride, xs.begin() + t * stride + row);
  auto y = poisoned<T>(static_cast<int64_t>(x.size()));
  auto back = poisoned<T>(static_cast<int64_t>(x.size()));
  emu::GlobalScope scope;
  scope.add(cos.data(), cos.size());
  scope.add(sin.data(), sin.size());
  scope.add(xs.data(), xs.size());
  scope.add(y.data(), y.size());
  scope.add(back.data(), back.size());
  const bool vector = half % vec16<T>() == 0 && stride % vec16<T>() == 0;
  const int vec = vector ? vec16<T>() : 1;
  LaunchShape s;
  s.block = 64;
  s.grid_x = 3;
  const RotaryArgs<T> f{xs.data(), y.data(), cos.data(), sin.data(), tokens,
                        heads,     head_dim, seq,        1.0f,       x_token_stride};
  const RotaryArgs<T> b{y.data(), back.data(), cos.data(), sin.data(), tokens,
                        heads,    head_dim,    seq,        -1.0f};
  emulate(s, [&] {
    if (vec == 1)
      rotary_block<T, 1>(f);
    else
      rotary_block<T, vec16<T>()>(f);
  });
  emulate(s, [&] {
    if (vec == 1)
      rotary_block<T, 1>(b);
    else
      rotary_block<T, vec16<T>()>(b);
  });
  std::vector<double> y_ref(y.size()), back_ref(y.size());
  ref::rotary(to_floats(x), cos, sin, tokens, heads, head_dim, seq, 1, y_ref);
  ref::rotary(to_floats(y), cos, sin, tokens, heads, head_dim, seq, -1, back_ref);
  expect_close("y", y, y_ref);
  expect_close("dx", back, back_ref);
  std::vector<double> x_back(x.size());
  for (size_t i = 0; i < x.size(); ++i) x_back[i] = to_float(x[i]);
  expect_close("round trip", back, x_back, default_tolerance(DType::kBF16));
}

TEST(RowsEmulated, RotaryBf16HeadDim64) { check_rotary<bf16>(10, 3, 64, 4); }
TEST(RowsEmulated, RotaryFp32HeadDim128) { check_rotary<float>(6, 2, 128, 6); }
TEST(RowsEmulated, RotaryBf16ScalarHeadDim10) { check_rotary<bf16>(5, 2, 10, 5); }
// Q (3 heads) read in place from a fused QKV output of 3 + 2 x 1 heads per token; K (1 head)
// from the same rows at its offset is the same access with another base; an odd stride takes
// the scalar path.
TEST(RowsEmulated, RotaryBf16QInsideQkv) { check_rotary<bf16>(12, 3, 64, 6, 5 * 64); }
TEST(RowsEmulated, RotaryFp32KInsideQkvOddStride) { check_rotary<float>(7, 1, 16, 4, 3 * 16 + 1); }

}  // namespace
}  // namespace hetplan::kernels
