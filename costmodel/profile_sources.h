// Which files make the profile a command runs on, in which order (later sources of a GPU type win
// over earlier ones of the same rank: profile.h), and which shipped datasheet priors `fit` adds
// under its inputs. The commands print what these return; docs/cli.md ("--calibration").
#pragma once

#include <string>
#include <vector>

#include "costmodel/calibration.h"
#include "costmodel/hardware.h"
#include "costmodel/input_files.h"
#include "costmodel/profile.h"

namespace hetplan {

// The profile for a run and the inputs it read once though they were named twice (for a note).
struct RunProfile {
  Profile profile;
  std::vector<RepeatedInput> repeated;
};

// The profile of predict, search, serve and provision: the shipped calibration data (unless
// `no_default`; only when the folder holds files), the cluster file's own calibration files, then
// `extra` (--calibration: files or folders), each file read once. A calibrated GPU type must be a
// preset or one `cluster` defines (require_known_gpu_types); InputError otherwise.
RunProfile run_profile(const std::vector<std::string>& extra, const ClusterSpec& cluster,
                       bool no_default);

// The shipped datasheet priors of the GPU types `inputs` calibrate, as the lowest-ranked sources
// of a fit: what a measured file leaves out (say, attention when --kernels did not run) then keeps
// its prior instead of a generic default. A prior that is one of the inputs is left out (it is
// fitted once, as the input).
std::vector<CalibrationFile> shipped_priors(const std::vector<CalibrationFile>& inputs);

}  // namespace hetplan
