// The model shape a training log describes, and the check that it is the model the user names.
#pragma once

#include <cstdint>
#include <string>

namespace hetplan {

struct ModelShape {
  int64_t blocks = 0, hidden = 0, heads = 0, kv_heads = 0, seq_len = 0;
  int64_t ffn_hidden = 0;  // 0: not given
};

// `model` ("" = none given) loaded and compared with `shape` (fields 0 are not checked); returns
// the name to record. Without a model, a descriptive name such as "megatron:l24-h1024-a16-s1024".
// Throws InputError naming `where` when the shapes differ.
std::string checked_model_name(const std::string& model, const ModelShape& shape,
                               const std::string& where);

}  // namespace hetplan
