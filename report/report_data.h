// The content of `hetplan report`: predictions matched to measurements, error metrics,
// calibration curves, and the pipeline timeline and memory of one strategy, as one JSON document
// (format "hetplan-report"). The HTML page is a view of it (report/html.h); `--json` writes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "costmodel/document.h"

namespace hetplan {

inline constexpr const char* kReportFormat = "hetplan-report";
inline constexpr int kReportSchemaVersion = 1;

struct ReportInputs {
  std::vector<std::string> predictions;   // predict/search --json outputs
  std::vector<std::string> measurements;  // measurements files
  std::vector<std::string> calibration;   // calibration files or folders of them
  int64_t strategy_index = 0;  // whose timeline and memory to draw, over all predictions in order
  std::string title = "hetplan: predicted against measured";
  std::string command;  // recorded in the report
};

// Reads every input and builds the report document. Throws InputError for bad input files.
Json build_report_data(const ReportInputs& inputs);

}  // namespace hetplan
