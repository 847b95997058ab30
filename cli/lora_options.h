// --lora-rank and --lora-modules, for the commands that search strategies (search, provision):
// every candidate fine-tunes with LoRA (the strategy key `lora`, docs/cli.md).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "costmodel/layer_ops.h"
#include "search/strategy.h"

namespace hetplan::cli {

struct LoraCliOptions {
  int64_t rank = 0;
  std::vector<std::string> modules;
};

inline void add_lora_options(CLI::App& app, LoraCliOptions& o) {
  CLI::Option* rank =
      app.add_option("--lora-rank", o.rank,
                     "Fine-tune with LoRA adapters of this rank beside the targeted linear layers, "
                     "the model's weights frozen (Megatron-Bridge's LoRA dim)")
          ->check(CLI::Range(int64_t{1}, kMaxLoraRank));
  // The names are costmodel's (parse_lora_target), not a second list.
  const CLI::Validator target(
      [](std::string& text) -> std::string {
        LoraTarget t;
        return parse_lora_target(text, t)
                   ? ""
                   : "expected one of " + lora_target_names() + ", got " + text;
      },
      "TARGET", "LORA_TARGET");
  app.add_option("--lora-modules", o.modules,
                 "With --lora-rank: the layers adapted, of " + lora_target_names() +
                     " (default: all four, Megatron-Bridge's target_modules)")
      ->delimiter(',')
      ->check(target)
      ->needs(rank);
}

// ", fine-tuning with LoRA rank 32 on linear_qkv" ("" without LoRA).
inline std::string lora_label(const Lora& lora) {
  if (!lora.enabled()) return "";
  std::string targets;
  for (LoraTarget t : lora_targets_of(lora.targets))
    targets += (targets.empty() ? "" : ", ") + std::string(to_string(t));
  return ", fine-tuning with LoRA rank " + std::to_string(lora.rank) + " on " + targets;
}

inline Lora lora_of(const LoraCliOptions& o) {
  Lora lora;
  lora.rank = o.rank;
  if (o.modules.empty()) return lora;
  lora.targets = 0;
  for (const auto& name : o.modules) {
    LoraTarget t;
    parse_lora_target(name, t);  // checked by the option's validator
    lora.targets |= static_cast<uint32_t>(t);
  }
  return lora;
}

}  // namespace hetplan::cli
