#include "report/import/log_strategy.h"

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "costmodel/model.h"

namespace hetplan {

std::string checked_model_name(const std::string& model_name, const ModelShape& shape,
                               const std::string& where) {
  if (model_name.empty()) {
    if (shape.blocks == 0)
      throw InputError(where, "", "the log does not describe the model: give --model");
    return fmt::format("megatron:l{}-h{}-a{}-s{}", shape.blocks, shape.hidden, shape.heads,
                       shape.seq_len);
  }
  const ModelSpec model = load_model(model_name);
  const LayerSpec* first = nullptr;
  for (const auto& l : model.layers)
    if (l.block()) {
      first = &l;
      break;
    }
  if (!first) throw InputError(model.origin, "", "the model has no transformer blocks");
  const TransformerLayer& b = *first->block();
  std::string diff;
  auto check = [&](const char* what, int64_t log, int64_t spec) {
    if (log > 0 && log != spec) diff += fmt::format(", {} {} (model {})", what, log, spec);
  };
  check("layers", shape.blocks, model.num_blocks());
  check("hidden", shape.hidden, first->hidden);
  check("heads", shape.heads, b.heads);
  check("query groups", shape.kv_heads, b.kv_heads);
  check("ffn hidden", shape.ffn_hidden, b.ffn_hidden);
  check("sequence length", shape.seq_len, model.seq_len);
  if (!diff.empty())
    throw InputError(where, "",
                     fmt::format("the log trains a different model than {}:{}; give "
                                 "the matching --model (a model file can set any "
                                 "shape)",
                                 model.name, diff.substr(1)));
  return model.name;
}

}  // namespace hetplan
