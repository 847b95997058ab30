// What the serving planner needs to know about a model: how many layers there are to place, and
// the bytes each one costs in VRAM, in KV cache and on the network.
#pragma once

#include <string>

#include "costmodel/dtype.h"
#include "costmodel/model.h"

namespace hetplan::serve {

struct ServingModel {
  std::string name;
  int num_layers = 0;                     // transformer blocks, placed on machines
  double layer_weight_bytes = 0;          // weights of one block (the largest, if they differ)
  double kv_bytes_per_token_layer = 0;    // K and V of one token in one block
  double activation_bytes_per_token = 0;  // hidden state of one token, sent between machines
  double token_bytes = 2;                 // one token id, sent by and to the clients (Helix: 2)
};

// Derives the serving model from a model spec with weights, KV cache and activations in `dtype`.
ServingModel serving_model_from(const ModelSpec& model, Dtype dtype);

}  // namespace hetplan::serve
