#include "profiler/common/model_source.h"

#include "costmodel/errors.h"

// The model loader and the layer-op decomposition land together on main; until then `--layers`
// says so instead of failing to link.
#if __has_include("costmodel/layer_ops.h")
#define HETPLAN_HAVE_MODEL_LOADER 1
#endif

namespace hetplan::profiler {

bool have_model_loader() {
#ifdef HETPLAN_HAVE_MODEL_LOADER
  return true;
#else
  return false;
#endif
}

ModelSpec load_layer_model(const std::string& name_or_path, int64_t seq_len) {
#ifdef HETPLAN_HAVE_MODEL_LOADER
  return load_model(name_or_path, seq_len);
#else
  (void)seq_len;
  throw InputError("--layers " + name_or_path +
                   ": this build has no model loader yet (costmodel/model.cpp has not landed)");
#endif
}

}  // namespace hetplan::profiler
