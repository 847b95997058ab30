// Helix's per-layer profile files, read once for every user: `serve --profiles` (the planner's
// per-layer times, serve/layer_time.h) and `hetplan import --format helix` (a calibration file,
// report/import/helix_import.cpp). A profile folder is <model>/<machine type>/ with
// prompt_bs2time.csv and decode_bs2time.csv: "batch,milliseconds" per line, no header, one
// transformer layer on one machine, batch in tokens (prompt) or requests (decode); "0,0" is
// Helix's anchor row.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace hetplan::serve {

struct Bs2TimeRow {
  int64_t batch = 0;
  double ms = 0;
  int line = 0;  // in the file, for messages
};

// Reads one bs2time table. Throws InputError naming the file and line for a malformed row, a
// negative value, a measured batch at 0 ms (it would make the machine's capacity unlimited), a
// time beyond kMaxMeasuredSeconds, or a batch given twice. A UTF-8 byte-order mark before the
// first row and CRLF line ends are accepted.
std::vector<Bs2TimeRow> read_bs2time_csv(const std::filesystem::path& path);

// The model preset whose times a Helix profile folder holds, by the folder's name
// (profiles/llama2_70b -> "llama2-70b", profiles/llama1_30b -> "llama1-30b"); "" for any other.
std::string helix_profile_model(const std::filesystem::path& dir);

// The names helix_profile_model() knows ("llama2_70b, llama1_30b"), for messages.
std::string helix_profile_model_folders();

// The hetplan GPU preset of a Helix machine folder's GPU ("a100" -> "a100-40gb": Helix's A100 is
// the 40 GB part; "v100", "l4", "t4"); nullopt for another.
std::optional<std::string> helix_gpu_preset(const std::string& gpu);

}  // namespace hetplan::serve
