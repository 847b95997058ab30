// hetplan_kernel_metrics: hardware counters and warp-stall reasons of our kernels through CUPTI's
// range profiler, for the GPU machines that have no Nsight Compute (docs/kernels.md "Hardware
// counters of our kernels"). Per selected kernel case and shape: CUDA-event timings (no counters
// needed), then one profiled run whose every kernel launch gets the metrics of
// profiler/metrics/metric_catalog.cpp. Prints a table; --json writes everything with provenance
// (rewritten after each case, so a run cut short keeps what it finished).
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>

#include "costmodel/errors.h"
#include "costmodel/version.h"
#include "kernels/bandwidth.h"
#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"
#include "kernels/dtype.h"
#include "kernels/registry.h"
#include "profiler/common/run_info.h"
#include "profiler/cuda_check.h"
#include "profiler/device.h"
#include "profiler/gemm/lt_gemm.h"
#include "profiler/metrics/metrics_options.h"
#include "profiler/metrics/metrics_report.h"
#include "profiler/metrics/range_profiler.h"
#include "profiler/provenance.h"

namespace hetplan::profiler::metrics {
namespace {

using kernels::Case;
using kernels::Instance;
using kernels::Shape;

// The cuBLASLt anchor as a registry-like instance: C = A B in bf16, fp32 accumulation.
class GemmAnchor : public Instance {
 public:
  explicit GemmAnchor(int64_t n)
      : n_(n),
        a_(static_cast<size_t>(n * n)),
        b_(static_cast<size_t>(n * n)),
        c_(static_cast<size_t>(n * n)),
        workspace_(kGemmWorkspaceBytes),
        gemm_(handle_.get(), Dtype::kBf16, GemmShape{n, n, n, 1, false, false}, nullptr) {
    kernels::fill_uniform(a_.get(), n * n, -1.f, 1.f, 1, nullptr);
    kernels::fill_uniform(b_.get(), n * n, -1.f, 1.f, 2, nullptr);
    HETPLAN_CUDA_CHECK(cudaDeviceSynchronize());
  }
  void run(cudaStream_t s) override {
    gemm_.run(a_.get(), b_.get(), c_.get(), workspace_.get(), s);
  }
  kernels::CheckResult check() override { return {}; }
  size_t device_bytes() const override { return 3 * a_.bytes() + workspace_.bytes(); }

 private:
  int64_t n_;
  LtHandle handle_;
  kernels::DeviceBuffer<kernels::bf16> a_, b_, c_;
  kernels::DeviceBuffer<unsigned char> workspace_;
  LtGemm gemm_;
};

struct Selected {
  std::string name, family, shape_text;
  kernels::Work work;
  std::function<std::string()> unsupported;
  std::function<std::unique_ptr<Instance>()> make;
};

std::vector<Selected> select_cases(const Options& o) {
  std::vector<Selected> out;
  for (const Pick& p : o.picks) {
    if (pick_matches(p.filter, kGemmCaseName, "gemm")) {
      const int64_t n = kGemmAnchorSize;
      const double bytes = 3.0 * n * n * 2, flops = 2.0 * n * n * n;
      out.push_back(
          {kGemmCaseName,
           "gemm",
           "m=" + std::to_string(n) + ",n=" + std::to_string(n) + ",k=" + std::to_string(n),
           {bytes, flops},
           [] { return std::string(); },
           [n] { return std::make_unique<GemmAnchor>(n); }});
    }
    for (const Case& c : kernels::all_cases()) {
      if (!pick_matches(p.filter, c.name, c.family)) continue;
      std::vector<Shape> shapes;
      if (p.shapes == "test")
        shapes = c.test_shapes;
      else
        for (size_t i : pick_shape_indices(p.shapes, c.bench_shapes.size()))
          shapes.push_back(c.bench_shapes[i]);
      for (const Shape& s : shapes)
        out.push_back({c.name, c.family, kernels::shape_string(c, s), c.work(s),
                       [&c, s] { return c.unsupported(s); },
                       [&c, s] { return c.make(s, 20261123); }});
    }
  }
  return out;
}

// RmProfilingAdminOnly of the driver's parameters ("1": counters for admin users only).
std::string profiling_admin_only() {
  std::ifstream in("/proc/driver/nvidia/params");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("RmProfilingAdminOnly:", 0) == 0) {
      std::string v = line.substr(21);
      v.erase(0, v.find_first_not_of(' '));
      return v;
    }
  return "";
}

Provenance provenance(const DeviceInfo& d, const std::string& command) {
  Provenance p;
  p.gpu = d.name;
  p.pci_bus_id = d.pci_bus_id;
  p.cc_major = d.cc_major;
  p.cc_minor = d.cc_minor;
  p.sm_count = d.sm_count;
  p.sm_clock_peak_mhz = d.sm_clock_mhz;
  p.memory_clock_peak_mhz = d.memory_clock_mhz;
  p.driver = nvml_driver_version();
  p.cuda_driver_api = cuda_version_text(d.driver_version);
  p.cuda_runtime = cuda_version_text(d.runtime_version);
  p.cupti_version = cupti_version_text();
  p.profiling_admin_only = profiling_admin_only();
  p.command = command;
  p.date_utc = utc_now_iso();
  p.host = host_name();
  p.tool_version = version();
  return p;
}

// Median CUDA-event time of one run, over `runs` runs after two warm-ups.
double event_median_us(Instance& inst, cudaStream_t stream, int runs) {
  for (int i = 0; i < 2; ++i) inst.run(stream);
  cudaEvent_t start = nullptr, stop = nullptr;
  HETPLAN_CUDA_CHECK(cudaEventCreate(&start));
  HETPLAN_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> us;
  for (int i = 0; i < runs; ++i) {
    HETPLAN_CUDA_CHECK(cudaEventRecord(start, stream));
    inst.run(stream);
    HETPLAN_CUDA_CHECK(cudaEventRecord(stop, stream));
    HETPLAN_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    HETPLAN_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    us.push_back(1e3 * ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

void write_json(const Report& r, const std::string& path) {
  if (path.empty()) return;
  std::ofstream out(path);
  out << to_json(r).dump(1) << "\n";
  if (!out) throw RuntimeFailure("cannot write " + path);
}

bool sticky(const std::string& what) {
  for (const char* s :
       {"cudaErrorIllegalAddress", "cudaErrorLaunchFailure", "cudaErrorIllegalInstruction",
        "cudaErrorMisalignedAddress", "cudaErrorHardwareStackError", "cudaErrorAssert"})
    if (what.find(s) != std::string::npos) return true;
  return false;
}

int run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string command = "hetplan_kernel_metrics";
  for (const std::string& a : args) command += " " + a;
  Options o;
  try {
    o = parse_options(args);
  } catch (const InputError& e) {
    std::cerr << "hetplan_kernel_metrics: " << e.what() << "\n" << usage();
    return 2;
  }
  if (o.help) {
    std::cout << usage();
    return 0;
  }
  if (o.list_metrics) {
    for (const MetricSpec& m : select_metrics(o.groups)) {
      std::cout << m.group << "  " << m.key << " [" << m.unit << "]: " << m.meaning << "\n";
      for (const std::string& c : m.candidates) std::cout << "      " << c << "\n";
    }
    return 0;
  }
  const std::vector<Selected> selected = select_cases(o);
  if (selected.empty()) {
    std::cerr << "hetplan_kernel_metrics: no case matches the filters (see --list)\n";
    return 2;
  }
  if (o.list) {
    for (const Selected& s : selected) std::cout << s.name << " " << s.shape_text << "\n";
    return 0;
  }

  int devices = 0;
  const cudaError_t found = cudaGetDeviceCount(&devices);
  if (found != cudaSuccess || devices == 0) {
    std::cerr << "hetplan_kernel_metrics: no GPU visible ("
              << (found != cudaSuccess ? cudaGetErrorString(found) : "0 devices")
              << "): nothing to profile. Run it on a GPU machine with the NVIDIA driver loaded "
                 "(check nvidia-smi and CUDA_VISIBLE_DEVICES).\n";
    return 1;
  }
  if (o.device >= devices) {
    std::cerr << "hetplan_kernel_metrics: --device " << o.device << ": only " << devices
              << " GPU(s) visible\n";
    return 2;
  }
  HETPLAN_CUDA_CHECK(cudaSetDevice(o.device));
  HETPLAN_CUDA_CHECK(cudaFree(nullptr));  // creates the primary context
  CUcontext ctx = current_context();
  if (ctx == nullptr) {
    std::cerr << "hetplan_kernel_metrics: no current CUDA context after cudaFree(0)\n";
    return 1;
  }

  Report report;
  report.provenance = provenance(query_device(o.device), command);
  std::unique_ptr<RangeProfiler> profiler;
  if (!o.counters) {
    report.counters.state = CounterState::kDisabled;
  } else {
    try {
      profiler = std::make_unique<RangeProfiler>(o.device, ctx);
      report.provenance.chip = profiler->chip();
      report.metrics = profiler->configure(select_metrics(o.groups));
      report.passes = profiler->passes();
    } catch (const CuptiFailure& e) {
      report.counters = e.status;
      profiler.reset();
    }
  }
  std::cerr << counter_status_message(report.counters, report.provenance.profiling_admin_only)
            << "\n";

  cudaStream_t stream = nullptr;
  HETPLAN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto t0 = std::chrono::steady_clock::now();
  bool context_lost = false;
  for (const Selected& s : selected) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CaseResult c;
    c.name = s.name;
    c.shape = s.shape_text;
    c.work_bytes = s.work.bytes;
    c.work_flops = s.work.flops;
    if (context_lost) {
      c.status = "not run: an earlier CUDA fault left the context unusable";
    } else if (o.max_seconds > 0 && elapsed > o.max_seconds) {
      c.status = "not run: --max-seconds " + std::to_string(o.max_seconds) + " reached";
    } else if (std::string why = s.unsupported(); !why.empty()) {
      c.status = "not supported: " + why;
    } else {
      std::cerr << "profiling " << s.name << " " << s.shape_text << "\n";
      try {
        std::unique_ptr<Instance> inst = s.make();
        HETPLAN_CUDA_CHECK(cudaDeviceSynchronize());
        c.timed_runs = o.runs;
        c.event_us_median = event_median_us(*inst, stream, o.runs);
        if (profiler) {
          try {
            c.launches = profiler->profile([&] {
              inst->run(stream);
              HETPLAN_CUDA_CHECK(cudaStreamSynchronize(stream));
            });
          } catch (const CuptiFailure& e) {
            c.counters_error = e.what();
            // Restricted or unsupported holds for every case: stop asking.
            if (e.status.state != CounterState::kFailed) {
              report.counters = e.status;
              profiler.reset();
            }
          }
        }
      } catch (const std::invalid_argument& e) {
        c.status = std::string("not supported: ") + e.what();
      } catch (const std::exception& e) {
        c.status = std::string("error: ") + e.what();
        context_lost = sticky(e.what());
      }
    }
    report.cases.push_back(std::move(c));
    write_json(report, o.json_path);
  }
  cudaStreamDestroy(stream);
  std::cout << render_table(report);
  if (!o.json_path.empty()) std::cout << "wrote " << o.json_path << "\n";
  const bool counters_missing = report.counters.state != CounterState::kCollected &&
                                report.counters.state != CounterState::kDisabled;
  if (context_lost) return 1;
  return counters_missing ? 3 : 0;
}

}  // namespace
}  // namespace hetplan::profiler::metrics

int main(int argc, char** argv) {
  try {
    return hetplan::profiler::metrics::run(argc, argv);
  } catch (const hetplan::InputError& e) {
    std::cerr << "hetplan_kernel_metrics: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "hetplan_kernel_metrics: " << e.what() << "\n";
    return 1;
  }
}
