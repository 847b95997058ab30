// Bandwidth probes: our copy kernel, cudaMemcpyAsync device-to-device, and a read-only sum. The
// best copy rate at the largest size is the yardstick of every memory-bound case.
#include <cmath>

#include "kernels/cases/case_util.h"
#include "kernels/cases/cases.h"

namespace hetplan::kernels::cases {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

class CopyInstance : public Instance {
 public:
  CopyInstance(int64_t bytes, uint64_t seed, bool use_memcpy)
      : n_(bytes / 4),
        src_(random_buffer<float>(n_, 0.5f, 1.5f, seed)),
        dst_(n_),
        memcpy_(use_memcpy) {}
  void run(cudaStream_t s) override {
    if (memcpy_)
      HETPLAN_CUDA_CHECK(
          cudaMemcpyAsync(dst_.get(), src_.get(), n_ * 4, cudaMemcpyDeviceToDevice, s));
    else
      copy_probe(src_.get(), dst_.get(), n_ * 4, s);
  }
  CheckResult check() override {
    dst_.fill_bytes(0xff);
    run(nullptr);
    finish();
    CheckResult r;
    std::vector<float> got;
    std::vector<double> want;
    for (auto [b, e] : sample_windows(n_)) {
      const auto in = fetch(src_, b, e - b), out = fetch(dst_, b, e - b);
      want.insert(want.end(), in.begin(), in.end());
      got.insert(got.end(), out.begin(), out.end());
    }
    judge(r, "dst", got, want, {0, 0});
    return r;
  }
  size_t device_bytes() const override { return total_bytes(src_, dst_); }

 private:
  int64_t n_;
  DeviceBuffer<float> src_, dst_;
  bool memcpy_;
};

class ReduceInstance : public Instance {
 public:
  ReduceInstance(int64_t bytes, uint64_t seed)
      : n_(bytes / 4),
        src_(random_buffer<float>(n_, 0.5f, 1.5f, seed)),
        partial_(read_reduce_workspace_floats()),
        sum_(1) {}
  void run(cudaStream_t s) override {
    read_reduce_probe(src_.get(), n_, sum_.get(), partial_.get(), s);
  }
  CheckResult check() override {
    sum_.fill_bytes(0xff);
    run(nullptr);
    finish();
    double want = 0;
    for (float x : fetch(src_)) want += x;
    CheckResult r;
    // fp32 partial sums of ~1e5 values each, then ~1e3 partials: relative error ~1e-6.
    judge(r, "sum", fetch(sum_), {want}, {1e-5, 1e-5});
    return r;
  }
  size_t device_bytes() const override { return total_bytes(src_, partial_, sum_); }

 private:
  int64_t n_;
  DeviceBuffer<float> src_, partial_, sum_;
};

Case probe(std::string name, std::string note, double traffic_factor,
           std::function<std::unique_ptr<Instance>(const Shape&, uint64_t)> make) {
  Case c = new_case("bandwidth", "probe", DType::kF32, std::move(note));
  c.name = std::move(name);
  c.dims = {"bytes"};
  c.test_shapes = {{4 * 1000003}, {64 * kMiB}};
  c.bench_shapes = {{64 * kMiB}, {256 * kMiB}, {1024 * kMiB}};
  c.work = [traffic_factor](const Shape& s) {
    return Work{traffic_factor * static_cast<double>(s[0]), 0};
  };
  c.make = std::move(make);
  return c;
}

}  // namespace

void add_probe_cases(std::vector<Case>& out) {
  out.push_back(probe("copy_probe", "16-byte vector copy kernel; counts bytes read + written", 2,
                      [](const Shape& s, uint64_t seed) {
                        return std::make_unique<CopyInstance>(s[0], seed, false);
                      }));
  out.push_back(probe("memcpy_d2d", "cudaMemcpyAsync device to device; bytes read + written", 2,
                      [](const Shape& s, uint64_t seed) {
                        return std::make_unique<CopyInstance>(s[0], seed, true);
                      }));
  out.push_back(probe(
      "read_probe", "fp32 sum of the buffer: bytes read only", 1,
      [](const Shape& s, uint64_t seed) { return std::make_unique<ReduceInstance>(s[0], seed); }));
}

}  // namespace hetplan::kernels::cases
