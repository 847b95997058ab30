// `hetplan predict --layer-ops`: each distinct layer's ops with their times per micro-batch, as
// the prediction document's "layer_ops" (docs/cli.md), and the table printed from it: heaviest
// first in each pass, against the layer's passes as the prediction takes them (after whole-layer
// corrections, recomputation, overlap and host stalls).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "costmodel/document.h"
#include "costmodel/model.h"
#include "search/evaluate.h"

namespace hetplan {

// One GPU type's entry of "layer_ops": {"gpu_type", "tp", "micro_batch", "layers": [{
// "first_layer", "name", "count", "forward_s", "backward_input_s", "backward_weight_s",
// "recompute_s", "host_sync_s", "corrected", "kernels", "host_s", "ops": [{"name", "kind", "pass",
// "seconds", "what"}]}]}: "kernels" a micro-batch (recomputation included), "host_s" the host's
// time to issue them.
Json layer_ops_json(const ModelSpec& model, const std::string& gpu_type, int64_t tp,
                    int64_t micro_batch, const std::vector<LayerOps>& layers);

// The table of a prediction document's "layer_ops" ("" where it has none); `replicas`: name each
// type with its tp and micro-batch (they differ between replica groups).
std::string layer_ops_text(const Json& document, bool replicas);

}  // namespace hetplan
