#include "report/stage_layout.h"

#include <fmt/format.h>

#include "costmodel/errors.h"

namespace hetplan {

std::string layer_structure_problem(const ModelSpec& model) {
  const auto& layers = model.layers;
  if (layers.size() < 3 || layers.front().kind() != LayerKind::kEmbedding ||
      layers.back().kind() != LayerKind::kLmHead)
    return fmt::format("model {} is not [embedding, transformer blocks, LM head]", model.name);
  for (size_t i = 1; i + 1 < layers.size(); ++i)
    if (layers[i].kind() != LayerKind::kTransformer)
      return fmt::format("model {}: layer {} is not a transformer block", model.name, i);
  return "";
}

std::string hybrid_export_problem(const ModelSpec& model) {
  if (!model.is_hybrid()) return "";
  std::string pattern;
  for (const auto& l : model.layers)
    if (const TransformerLayer* b = l.block()) {
      const char c = hybrid_letter(*b);
      pattern += c != 0 ? c : 'T';  // T: attention and an MLP together
    }
  if (pattern.size() > 60) pattern = pattern.substr(0, 57) + "...";
  return fmt::format(
      "model {} is a hybrid model (layers {}: M Mamba-2, * attention, - MLP, E MoE), which this "
      "framework's configuration has no layers for; Megatron-LM trains it with pretrain_hybrid.py "
      "and --hybrid-layer-pattern (export --format megatron)",
      model.name, pattern);
}

std::vector<StageBlocks> split_by_counts(const std::vector<int64_t>& counts) {
  std::vector<StageBlocks> out;
  int64_t next = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    out.push_back({i == 0, next, counts[i], i + 1 == counts.size()});
    next += counts[i];
  }
  return out;
}

std::vector<StageBlocks> even_split(int64_t num_blocks, int64_t stages) {
  if (stages <= 0 || num_blocks % stages != 0) return {};
  return split_by_counts(std::vector<int64_t>(stages, num_blocks / stages));
}

std::vector<StageBlocks> strategy_stage_blocks(const Strategy& s, int64_t num_blocks) {
  std::vector<StageBlocks> out;
  if (s.stages.empty() || s.stages.front().first_layer < 0) return out;
  const int64_t head = num_blocks + 1;
  int64_t next = 0;
  for (size_t i = 0; i < s.stages.size(); ++i) {
    const StageSpec& st = s.stages[i];
    if (st.first_layer != next || st.last_layer < st.first_layer)
      throw InputError(
          fmt::format("stage {} holds layers {}-{}; expected it to start at layer {} "
                      "(stages hold contiguous layers in order)",
                      i, st.first_layer, st.last_layer, next));
    StageBlocks b;
    b.embedding = st.first_layer == 0;
    b.head = st.last_layer == head;
    const int64_t first = std::max<int64_t>(st.first_layer, 1);
    const int64_t last = std::min<int64_t>(st.last_layer, num_blocks);
    b.first_block = first - 1;
    b.blocks = std::max<int64_t>(0, last - first + 1);
    out.push_back(b);
    next = st.last_layer + 1;
  }
  if (next != head + 1)
    throw InputError(
        fmt::format("the stages end at layer {}; the model has layers 0-{}", next - 1, head));
  return out;
}

std::vector<StageSpec> to_stage_specs(const std::vector<StageBlocks>& stages) {
  std::vector<StageSpec> out;
  for (const auto& b : stages) {
    StageSpec st;
    st.first_layer = b.embedding ? 0 : b.first_block + 1;
    st.last_layer = b.head ? b.first_block + b.blocks + 1 : b.first_block + b.blocks;
    out.push_back(st);
  }
  return out;
}

}  // namespace hetplan
