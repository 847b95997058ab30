// The stage column of `hetplan search`'s table: layers per pipeline stage, by GPU type.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "search/strategy.h"

namespace hetplan::cli {

// The most characters the stage column takes before it is cut short.
inline constexpr size_t kStageColumnWidth = 60;

// Layers per (virtual) stage in model order, consecutive stages of one GPU type under its name:
// "a100-40gb 14 | t4 1,1 | a100-40gb 10". A run of three or more stages of one count is written
// "6(x4)" (four stages of 6 layers). Past `width` characters the list ends at the last stage that
// fits, with "... +N stages".
std::string stage_layers_summary(const std::vector<StagePrediction>& stages,
                                 size_t width = kStageColumnWidth);

}  // namespace hetplan::cli
