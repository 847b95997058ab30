// The table `hetplan predict --layer-ops` prints: each distinct layer's ops with their times per
// micro-batch, heaviest first in each pass, against the layer's passes as the prediction takes
// them (after whole-layer corrections, recomputation, overlap and host stalls).
#pragma once

#include <string>
#include <vector>

#include "costmodel/model.h"
#include "search/evaluate.h"

namespace hetplan {

std::string layer_ops_text(const ModelSpec& model, const std::string& gpu_type,
                           const std::vector<LayerOps>& layers);

}  // namespace hetplan
