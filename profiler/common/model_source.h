// Loads the models of `--layers MODEL` through costmodel's model loader (presets, model files,
// Hugging Face config.json).
#pragma once

#include <cstdint>
#include <string>

#include "costmodel/model.h"

namespace hetplan::profiler {

// Whether this build has costmodel's model loader (it lands with costmodel/layer_ops.h).
bool have_model_loader();
// The model named by `name_or_path`, at `seq_len` tokens when > 0. Throws InputError when it does
// not load (or when this build has no model loader).
ModelSpec load_layer_model(const std::string& name_or_path, int64_t seq_len);

}  // namespace hetplan::profiler
