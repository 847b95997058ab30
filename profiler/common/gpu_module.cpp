#include "profiler/common/gpu_module.h"

#include <dlfcn.h>

#include <filesystem>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "costmodel/version.h"

namespace hetplan::profiler {
namespace {

constexpr const char* kModuleFile = "libhetplan_gpu.so";

// (Unused in a build without CUDA, where load() fails at once: the main job's build.)
[[maybe_unused]] std::vector<std::filesystem::path> candidate_paths() {
  if (const char* env = std::getenv("HETPLAN_GPU_MODULE"); env != nullptr && *env != '\0')
    return {env};
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {kModuleFile};  // the dynamic loader's search path
  const auto dir = exe.parent_path();
  // Beside the executable (the build folder), where `cmake --install` puts it
  // (<prefix>/lib/hetplan, cmake/Install.cmake), then ../lib.
  return {dir / kModuleFile, dir.parent_path() / "lib" / "hetplan" / kModuleFile,
          dir.parent_path() / "lib" / kModuleFile};
}

GpuModule load() {
#ifndef HETPLAN_HAVE_CUDA
  throw RuntimeFailure(
      "this hetplan was built without CUDA (no nvcc, cuBLASLt, CUPTI or NCCL at "
      "build time), so it cannot measure a GPU: no GPU support");
#else
  std::string tried;
  for (const auto& path : candidate_paths()) {
    std::error_code ec;
    if (path.has_parent_path() && !std::filesystem::exists(path, ec)) {
      tried += fmt::format("\n  {}: not there", path.string());
      continue;
    }
    // RTLD_LOCAL: the module keeps its own copies of the libraries it was linked with.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      throw RuntimeFailure(fmt::format(
          "cannot load hetplan's GPU module {}: {} (the CUDA libraries it needs, cuBLAS(Lt), "
          "CUPTI and NCCL, must be on the library path, e.g. LD_LIBRARY_PATH=/usr/local/cuda/lib)",
          path.string(), why ? why : "unknown error"));
    }
    auto entry = reinterpret_cast<GpuModuleEntry>(dlsym(handle, kGpuModuleSymbol));
    if (entry == nullptr)
      throw RuntimeFailure(fmt::format("{} is not a hetplan GPU module (no symbol {})",
                                       path.string(), kGpuModuleSymbol));
    GpuModule m;
    const std::string signature = gpu_module_signature();
    if (const int abi = entry(kGpuModuleAbi, signature.c_str(), &m); abi != 0)
      throw RuntimeFailure(
          fmt::format("{} comes from another build of hetplan (module ABI {}; "
                      "this hetplan: ABI {}, {}): rebuild both together",
                      path.string(), abi, kGpuModuleAbi, signature));
    return m;  // the handle stays open for the life of the process
  }
  throw RuntimeFailure(
      fmt::format("hetplan's GPU module {} was not found:{}\nbuild with CUDA "
                  "(scripts/build.sh) or set HETPLAN_GPU_MODULE to its path",
                  kModuleFile, tried));
#endif
}

}  // namespace

std::string gpu_module_signature() {
  return fmt::format("hetplan {}, sizes {} {} {} {} {}", version(), sizeof(CalibrateOptions),
                     sizeof(CalibrationOutcome), sizeof(CollectiveOptions),
                     sizeof(CollectiveRunSummary), sizeof(CalibrationFile));
}

const GpuModule& gpu_module() {
  static std::once_flag once;
  static GpuModule module;
  std::call_once(once, [] { module = load(); });
  return module;
}

}  // namespace hetplan::profiler
