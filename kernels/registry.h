// The registry of kernel benchmark cases: every kernel of this folder, as a uniform table the
// profiler (`hetplan calibrate --kernels`), the benchmark driver and the GPU tests iterate over
// without knowing any kernel (in the manner of nccl-tests' per-collective callbacks and the
// CUTLASS profiler's operation table).
//
// A Case names its size space (dims), lists small shapes for tests and large ones for the
// benchmark, counts the minimum bytes and the FLOPs of a run, and makes Instances: device
// buffers filled with random values (never zeros) for one shape. An Instance runs the kernel(s)
// once per run() call, asynchronously, and check() verifies one run against the CPU reference
// (every output element at test sizes, a sample of rows or windows plus every weight-gradient
// column at large ones), poisoning outputs first so that unwritten elements fail.
//
// Typical use (the benchmark):
//   for (const Case& c : all_cases())
//     for (const Shape& s : c.bench_shapes) {
//       if (std::string why = c.unsupported(s); !why.empty()) { report "not supported: " + why;
//       continue; } auto inst = c.make(s, seed); CheckResult ok = inst->check();            //
//       verify before timing time inst->run(stream) with CUDA events;  bytes / time against the
//       copy bandwidth
//     }
// Adding a kernel: one cases/*.cpp entry (a Case with its Instance class) and its add_* call in
// registry.cpp.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/reference/compare.h"

namespace hetplan::kernels {

// One point of a case's size space: a value for each of Case::dims, in order.
using Shape = std::vector<int64_t>;

// What one run must move and compute at least: every input read once, every output written once
// (bytes), and the floating-point operations (FLOPs; 0 for memory-bound kernels).
struct Work {
  double bytes = 0;
  double flops = 0;
};

// Which ceiling the case is judged against: memory bandwidth or arithmetic rate.
enum class Bound { kMemory, kCompute };

// One case allocated and initialised at one shape. Owns its device memory.
class Instance {
 public:
  virtual ~Instance() = default;
  // Launches the case's kernel(s) once on `stream` (asynchronous). In-place cases (AdamW, the
  // accumulating embedding backward) change their state each run; values stay finite.
  virtual void run(cudaStream_t stream) = 0;
  // Poisons the outputs, runs once on the default stream, waits, and compares with the CPU
  // reference. Never throws for a wrong result (it is reported); throws KernelError when CUDA
  // fails.
  virtual CheckResult check() = 0;
  // Device memory held, so a benchmark can rotate enough instances to defeat the L2 cache.
  virtual size_t device_bytes() const = 0;
};

struct Case {
  std::string name;    // unique: "<kernel>_<dtype>", e.g. "layernorm_fwd_bf16"
  std::string family;  // kernel family, e.g. "layernorm"; several cases share one
  std::string
      pass;  // "forward", "backward_input", "backward_weight", "backward", "optimizer", "probe"
  DType dtype = DType::kBF16;
  Bound bound = Bound::kMemory;
  std::string note;                 // what exactly runs (layout, fixed parameters)
  std::vector<std::string> dims;    // names of the shape's values, e.g. {"rows", "cols"}
  std::vector<Shape> test_shapes;   // small and odd sizes: the GPU tests check each
  std::vector<Shape> bench_shapes;  // large sizes: the benchmark checks and times each
  std::function<Work(const Shape&)> work;
  // Allocates and fills an instance; inputs from `seed` (same seed, same inputs). Throws
  // std::invalid_argument for a shape the kernels do not support.
  std::function<std::unique_ptr<Instance>(const Shape&, uint64_t seed)> make;
  // Empty when the current device can run the case at this shape, else why not (e.g. bf16
  // attention on sm_75).
  std::function<std::string(const Shape&)> unsupported;
};

// Every case, in a stable order (probes first, then by layer position).
const std::vector<Case>& all_cases();
// The case called `name`, or nullptr.
const Case* find_case(std::string_view name);
// "rows=8192,cols=4096".
std::string shape_string(const Case& c, const Shape& s);

}  // namespace hetplan::kernels
