// The table every collective fills (nccl-tests style): buffer sizes for a whole array of `count`
// elements, how each rank's input is initialised, how its output is checked, and how one operation
// is enqueued. The harness (harness.h) is written once against this table; adding a collective is
// one file and one line in registry.cpp. The bus-bandwidth factor lives with the file format
// (costmodel bus_bandwidth_factor), which the CPU side needs too. The .cu files are C++17 (see
// cmake/Cuda.cmake), so this header includes nothing of the C++20 file-format headers.
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "costmodel/dtype.h"

namespace hetplan::profiler::coll {

// One rank's buffers for one operation.
struct RankBuffers {
  void* send = nullptr;
  void* recv = nullptr;
  size_t send_count = 0;  // elements
  size_t recv_count = 0;
  size_t elem_bytes = 0;
  Dtype dtype = Dtype::kBf16;
  int rank = 0;
  int nranks = 1;
};

struct CollectiveOps {
  // Per-rank element counts of the send and receive buffers for a whole array of `count`.
  void (*counts)(size_t count, int nranks, size_t* send_count, size_t* recv_count);
  // Fills this rank's send buffer with its pattern (pattern.cuh).
  void (*init)(const RankBuffers& b, cudaStream_t stream);
  // Adds the number of wrong elements of the receive buffer to *errors (device memory).
  void (*check)(const RankBuffers& b, unsigned long long* errors, cudaStream_t stream);
  // Enqueues one operation; the harness wraps all local ranks in ncclGroupStart/End.
  ncclResult_t (*run)(const RankBuffers& b, ncclDataType_t type, ncclComm_t comm,
                      cudaStream_t stream);
};

// NCCL's type for a dtype; throws RuntimeFailure for dtypes NCCL collectives do not take here.
ncclDataType_t nccl_type(Dtype dtype);
// Bytes per element as the buffers hold them.
size_t element_bytes(Dtype dtype);

// The sender's pattern for p2p transfers (fp32), and the receiver's check of it.
void fill_sender_pattern(void* buf, size_t count, int src, cudaStream_t stream);
void check_sender_pattern(const void* buf, size_t count, int src, unsigned long long* errors,
                          cudaStream_t stream);

}  // namespace hetplan::profiler::coll
