// The JSON layer list of `hetplan model-info`, shared with `hetplan measure`.
#pragma once

#include "costmodel/document.h"
#include "costmodel/model.h"

namespace hetplan::cli {

// {"format": "hetplan-model-info", "layers": [...]}: every layer with all its fields.
Json model_info_json(const ModelSpec& model);

}  // namespace hetplan::cli
