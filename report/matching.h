// Matching predictions to measurements: by model and a normalised strategy key. Fields that have
// no effect at a degree of 1 are normalised away (the schedule without a pipeline, sequence
// parallelism without tensor parallelism, ZeRO without data parallelism), so that a strategy
// written two ways still matches. The layer partition and placement are not part of the key.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "costmodel/measurements.h"
#include "report/predictions.h"
#include "search/strategy.h"

namespace hetplan {

// "dp2 tp2 pp2 mb4 gb64 1f1b selective zero1 sp"
std::string strategy_key(const Strategy& s);

// A measurement with its strategy read and its prediction, when one matched.
struct MatchedMeasurement {
  Measurement measurement;
  Strategy strategy;
  std::string key;
  std::string file;         // the measurements file it came from
  int64_t prediction = -1;  // index into the predictions list; -1 = unmatched
};

struct Matching {
  std::vector<MatchedMeasurement> measurements;
  std::vector<int64_t> unmatched_predictions;  // indices of predictions no measurement matched
};

// Matches every measurement to the first prediction (in the order given) of the same model and
// key. Reads each measurement's strategy (InputError names the file and key path when bad).
Matching match_measurements(const std::vector<PredictedStrategy>& predictions,
                            const std::vector<MeasurementsFile>& files);

}  // namespace hetplan
