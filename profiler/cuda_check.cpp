#include "profiler/cuda_check.h"

#include <unistd.h>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include <cupti.h>
#include <fmt/format.h>

#include "costmodel/errors.h"

namespace hetplan::profiler {
namespace {

// File path relative to the repository, so messages read the same on every machine.
std::string_view relative_file(const char* file) {
  std::string_view f(file);
#ifdef HETPLAN_SOURCE_DIR
  const std::string_view root(HETPLAN_SOURCE_DIR "/");
  if (f.substr(0, root.size()) == root) f.remove_prefix(root.size());
#endif
  return f;
}

}  // namespace

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "unknown-host";
  return buf;
}

int launcher_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}) {
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return std::atoi(v);
  }
  return -1;
}

std::string where_text() {
  const int rank = launcher_rank();
  return rank >= 0 ? fmt::format("host {}, rank {}", host_name(), rank)
                   : fmt::format("host {}", host_name());
}

void throw_check_failure(const char* library, const char* call, const std::string& error,
                         const char* file, int line) {
  throw RuntimeFailure(fmt::format("{} error in {} at {}:{} on {}: {}", library, call,
                                   relative_file(file), line, where_text(), error));
}

std::string cupti_error_text(CUptiResult result) {
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr)
    return fmt::format("CUPTI result {}", static_cast<int>(result));
  return text;
}

}  // namespace hetplan::profiler
