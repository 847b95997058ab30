// Internal: the Hopper (sm_90a, wgmma) attention launchers of kernels/sm90a/attention_hopper.cu,
// which attention.cu dispatches to on compute capability 9.0 when they were built
// (HETPLAN_HOPPER_ATTENTION). The backward launcher runs only the main kernel; attention.cu runs
// the preprocessing (D, zeroed dQ accumulator) before and the dQ conversion after it.
#pragma once

#include <cuda_runtime.h>

#include "kernels/attention_kernels.h"

namespace hetplan::kernels {

template <class T>
void attention_forward_hopper(const AttentionParams<T>& p, int head_dim, cudaStream_t stream);
template <class T>
void attention_backward_hopper(const AttentionParams<T>& p, int head_dim, cudaStream_t stream);

}  // namespace hetplan::kernels
