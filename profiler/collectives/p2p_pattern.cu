// The p2p matrix's data: the sender's fp32 pattern, checked on the receiver.
#include "profiler/collectives/pattern.cuh"

namespace hetplan::profiler::coll {
namespace {

struct FromSender {
  int src;
  __device__ float operator()(size_t i) const { return pattern_value(src, i); }
};

}  // namespace

void fill_sender_pattern(void* buf, size_t count, int src, cudaStream_t stream) {
  fill_pattern(buf, count, Dtype::kFp32, src, 0, stream);
}

void check_sender_pattern(const void* buf, size_t count, int src, unsigned long long* errors,
                          cudaStream_t stream) {
  check_buffer(buf, count, Dtype::kFp32, FromSender{src}, 0.f, errors, stream);
}

}  // namespace hetplan::profiler::coll
