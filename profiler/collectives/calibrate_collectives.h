// Entry point of `hetplan calibrate --collectives`: NCCL collectives over every planned group,
// the pairwise p2p matrix and host-device copies, on one process driving all GPUs of a node or on
// several processes started by mpirun, srun or torchrun (rank and size from the environment, see
// profiler/common/launcher.h). Every process journals its own results beside the output file
// (`<out>.collectives.rank<k>.jsonl`), so a rank that dies loses nothing and `--resume` continues;
// rank 0 combines the ranks' results and is the one that writes the calibration file.
#pragma once

#include <cstdint>

#include "costmodel/calibration.h"
#include "costmodel/journal.h"
#include "profiler/common/collective_plan.h"

namespace hetplan::profiler {

struct CollectiveRunSummary {
  bool writer = true;  // rank 0: writes the calibration file
  int rank = 0, ranks = 1;
  int64_t measured = 0;  // measurements taken in this run
  int64_t reused = 0;    // taken from the journals (--resume)
  int64_t failed = 0;    // recorded as failed (NCCL errors, hangs, wrong results)
};

// Runs the sweep. On rank 0, every measurement is appended to `out` (and, when `main_journal` is
// given, journalled there under collective/..., p2p/... or host_device/... keys as the calibrate
// framework assembles them); other ranks leave `out` alone. Throws RuntimeFailure when there is no
// GPU on some process (every rank reports it) or a rank is lost.
CollectiveRunSummary run_collective_calibration(const CollectiveOptions& options,
                                                CalibrationFile& out, Journal* main_journal,
                                                const CollectiveProgressFn& progress);

}  // namespace hetplan::profiler
