// A calibration section (GEMM grid, layer GEMMs, kernels, layers, collectives): it plans its
// measurements and then takes them one at a time. The harness (calibrate.cpp) does the rest once
// for all sections: the printed plan, resume, the journal, progress, SIGINT and failures. Adding a
// section is one file and one line in sections.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "costmodel/calibration.h"
#include "profiler/common/options.h"
#include "profiler/common/plan.h"
#include "profiler/common/progress.h"

namespace hetplan::profiler {

class DeviceContext;
class CuptiTracer;
class ClockMonitor;
}  // namespace hetplan::profiler
namespace hetplan {
class Journal;
}
namespace hetplan::profiler {

// What a section may use while it runs.
struct SectionContext {
  const CalibrateOptions& options;
  DeviceContext& device;
  CuptiTracer& tracer;
  ClockMonitor& clocks;    // read during every timed region (TimingOptions::clocks)
  Provenance& provenance;  // sections add library versions and notes
  Progress& progress;      // for messages above the bar
  Journal* journal;        // the run's journal; null on ranks other than 0 of a multi-process run
};

// What a section that drives its own sweep did.
struct SectionCounts {
  int64_t measured = 0, failed = 0, reused = 0;
};

class Section {
 public:
  virtual ~Section() = default;
  // Name in the printed plan and the progress line: "gemm", "layer_gemm", ...
  virtual std::string name() const = 0;
  // Every measurement this run would take (resume drops the finished ones afterwards). Throws
  // InputError for bad options (a model that does not load), before any GPU work starts.
  virtual std::vector<PlanItem> plan(SectionContext& ctx) = 0;
  // Before the first measurement, with the items still to do: allocate pools, create handles.
  // A throw here fails the section (recorded), not the run.
  virtual void begin(SectionContext& ctx, const std::vector<PlanItem>& todo) {
    (void)ctx;
    (void)todo;
  }
  // Measures one item and returns its journal record (the measurement's JSON). A throw records the
  // item as failed and the section goes on.
  virtual Json measure(const PlanItem& item, SectionContext& ctx) = 0;
  // After the last measurement (also after a stop): release what begin() took.
  virtual void end(SectionContext& ctx) { (void)ctx; }

  // Sections whose measurements run in lock step over several processes (the collectives) drive
  // their own sweep: the harness calls run() once instead of measure(); such a section journals
  // through ctx.journal and reports progress itself. A throw records the section as failed.
  virtual bool drives_itself() const { return false; }
  virtual SectionCounts run(SectionContext& ctx) {
    (void)ctx;
    return {};
  }
};

// The sections of a run, in the order they run, for the options given. `multi_process`: launched
// as one of several processes (mpirun, srun), where only the collectives run.
std::vector<std::unique_ptr<Section>> make_sections(const CalibrateOptions& options,
                                                    bool multi_process = false);

// One factory per section (sections.cpp lists them).
std::unique_ptr<Section> make_gemm_grid_section();
std::unique_ptr<Section> make_layer_gemm_section(std::vector<std::string> models);
std::unique_ptr<Section> make_kernels_section();
std::unique_ptr<Section> make_layer_timing_section(std::vector<std::string> models);
// NCCL collectives, p2p matrix and host-device copies (profiler/collectives/, issue 6).
std::unique_ptr<Section> make_collectives_section();

}  // namespace hetplan::profiler
