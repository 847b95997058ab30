// Options shared by the log importers (`hetplan import --format megatron|deepspeed`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace hetplan {

struct LogImportOptions {
  std::string model;     // recorded as the measurement's model; checked against the log's shape
  std::string cluster;   // recorded as is
  std::string gpu_type;  // recorded in the context
  // Logged iterations (Megatron-LM) or steps (DeepSpeed) at the start of a run whose timing is
  // dropped: the first iterations allocate memory, autotune kernels and warm up NCCL.
  int64_t warmup_iterations = 2;
  std::string memory_kind = "allocated";  // "allocated" or "reserved"
  // Fields a log may not carry (DeepSpeed has no tensor or pipeline width unless it prints them).
  std::optional<int64_t> tp, pp;
  std::optional<std::string> recompute;  // none, selective, full
};

}  // namespace hetplan
