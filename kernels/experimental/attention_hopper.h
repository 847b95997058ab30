// Internal: the Hopper (sm_90a, wgmma) attention launchers of sm90a/attention_hopper.cu, which
// attention.cu dispatches to on compute capability 9.0 when they were built
// (HETPLAN_EXPERIMENTAL_KERNELS, which defines HETPLAN_HOPPER_ATTENTION for attention.cu). The
// backward launcher runs only the main kernel; attention.cu runs the preprocessing (D, zeroed dQ
// accumulator) before and the dQ conversion after it.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "kernels/attention.h"
#include "kernels/attention_kernels.h"

namespace hetplan::kernels {

template <class T>
void attention_forward_hopper(const AttentionParams<T>& p, int head_dim, cudaStream_t stream);
template <class T>
void attention_backward_hopper(const AttentionParams<T>& p, int head_dim, cudaStream_t stream);

// Runs variant `variant` (0 .. kWgmmaSelftestVariants - 1) of kernels/experimental/wgmma_selftest.h
// on the current device (which must be one where hopper_attention_available()); returns its output.
std::vector<float> wgmma_selftest_run(int variant);
// Runs kernels/experimental/bulk_selftest.h (mbarrier ring and bulk reduce) on the current device
// (one where hopper_attention_available()); returns its output, for bulk_selftest_check.
std::vector<float> bulk_selftest_run();

}  // namespace hetplan::kernels
