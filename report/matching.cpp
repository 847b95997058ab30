#include "report/matching.h"

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "search/rules.h"

namespace hetplan {
namespace {

// A measured strategy as its framework runs it: the switches it leaves out take that framework's
// defaults (as predict reads a strategy file). Without a framework it stays as written.
Strategy as_run(Strategy s, const std::string& origin) {
  if (s.framework.empty()) return s;
  const FrameworkSpec* framework = nullptr;
  try {
    framework = &loaded_framework(s.framework);
  } catch (const InputError& e) {
    throw InputError(origin, "framework", e.what());
  }
  return with_framework_defaults(std::move(s), *framework);
}

// Frameworks named on both sides must be the same one.
bool same_framework(const Strategy& a, const Strategy& b) {
  return a.framework.empty() || b.framework.empty() || a.framework == b.framework;
}

}  // namespace

std::string strategy_key(const Strategy& s) {
  const bool pipeline = s.pp > 1;
  std::string schedule = pipeline ? s.schedule : "-";
  if (pipeline && s.chunks > 1) schedule += fmt::format("x{}", s.chunks);
  const int zero = s.dp > 1 ? s.zero : 0;
  const bool sp = s.tp > 1 && s.sequence_parallel;
  // Fusion switches change the predicted time, so a measurement of one setting is never compared
  // with a prediction of the other. The harness records "grad_accumulation_fusion": false for
  // what it ran (it counts more gradient traffic); unfused attention keeps s^2 tensors and runs
  // the score GEMMs.
  // Gradients are reduced over data-parallel replicas only: with dp = 1 the overlap has no effect.
  Strategy switches = s;
  if (s.dp == 1) switches.overlap_grad_reduce = true;
  return fmt::format("dp{} tp{} pp{} mb{} gb{} {} {} zero{}{}{}", s.dp, s.tp, s.pp, s.micro_batch,
                     s.global_batch, schedule, s.recompute_label(), zero, sp ? " sp" : "",
                     framework_switches(switches));
}

Matching match_measurements(const std::vector<PredictedStrategy>& predictions,
                            const std::vector<MeasurementsFile>& files) {
  Matching out;
  std::vector<std::string> keys;
  for (const auto& p : predictions) keys.push_back(strategy_key(as_run(p.strategy, p.origin)));
  std::vector<bool> used(predictions.size(), false);
  for (const auto& file : files) {
    for (const auto& m : file.measurements) {
      MatchedMeasurement mm;
      mm.measurement = m;
      mm.file = file.origin;
      mm.strategy = as_run(
          strategy_from_json(ObjectReader(m.strategy, file.origin, m.key_path + ".strategy")),
          file.origin);
      mm.key = strategy_key(mm.strategy);
      for (size_t i = 0; i < predictions.size(); ++i)
        if (predictions[i].model == m.model && keys[i] == mm.key &&
            same_framework(predictions[i].strategy, mm.strategy)) {
          mm.prediction = static_cast<int64_t>(i);
          used[i] = true;
          break;
        }
      out.measurements.push_back(std::move(mm));
    }
  }
  for (size_t i = 0; i < predictions.size(); ++i)
    if (!used[i]) out.unmatched_predictions.push_back(static_cast<int64_t>(i));
  return out;
}

}  // namespace hetplan
