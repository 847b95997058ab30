// The bandwidth probe (a device-to-device copy and a read-only reduction) and the random fill
// that initialises every benchmark input (never zeros). Asynchronous on `stream`.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/dtype.h"

namespace hetplan::kernels {

// dst[0, bytes) = src[0, bytes); both 16-byte aligned. Moves 2 * bytes.
void copy_probe(const void* src, void* dst, int64_t bytes, cudaStream_t stream);

// *sum = the fp32 sum of src[0, n) (reads 4 n bytes); workspace holds read_reduce_partials()
// floats. The sum's rounding depends on the grid, not on timing: deterministic per device.
void read_reduce_probe(const float* src, int64_t n, float* sum, float* workspace,
                       cudaStream_t stream);
size_t read_reduce_workspace_floats();

// p[i] = lo + (hi - lo) * u_i with u_i uniform in [0, 1) from Philox(seed, i): the same values
// as kernels/reference/random.h's random_vector<T>(n, lo, hi, seed), up to fp32 contraction.
template <class T>
void fill_uniform(T* p, int64_t n, float lo, float hi, uint64_t seed, cudaStream_t stream);
// p[i] uniform in [lo, hi), as random_ints().
void fill_uniform_ints(int32_t* p, int64_t n, int32_t lo, int32_t hi, uint64_t seed,
                       cudaStream_t stream);

}  // namespace hetplan::kernels
