// `--collectives`: the NCCL sweep of profiler/collectives/ (issue 6) as a section of the
// calibration. The sweep drives itself (several processes run the same measurements in lock step
// and rank 0 combines them); it journals into the run's journal under collective/, p2p/ and
// host_device/ keys, and resumes from its per-rank journals beside the output file.
#include <fmt/format.h>

#include "profiler/collectives/calibrate_collectives.h"
#include "profiler/section.h"

namespace hetplan::profiler {
namespace {

class CollectivesSection : public Section {
 public:
  std::string name() const override { return "collectives"; }

  std::vector<PlanItem> plan(SectionContext& ctx) override {
    ctx.progress.message(
        "calibrate: collectives: planned when the processes have met (groups "
        "depend on every process's GPUs)");
    return {};
  }
  Json measure(const PlanItem&, SectionContext&) override { return Json(); }
  bool drives_itself() const override { return true; }

  SectionCounts run(SectionContext& ctx) override {
    CollectiveOptions o;
    o.out_path = ctx.options.out;
    o.resume = ctx.options.resume;
    o.quick = ctx.options.quick;
    CalibrationFile scratch;  // the file is assembled from the journal; this keeps the notes
    size_t seen = 0;
    bool planned = false;
    Progress& progress = ctx.progress;
    const auto report = [&](size_t done, size_t total, const std::string& what) {
      if (!planned) {
        progress.add_planned(static_cast<int64_t>(total), 0);
        planned = true;
      }
      for (; seen < done; ++seen) progress.finished(what, 0);
    };
    const CollectiveRunSummary s = run_collective_calibration(o, scratch, ctx.journal, report);
    Provenance& p = ctx.provenance;
    p.add_note(scratch.context.notes);
    p.gpu_count = std::max(p.gpu_count, scratch.context.gpu_count);
    return {s.measured, s.failed, s.reused};
  }
};

}  // namespace

std::unique_ptr<Section> make_collectives_section() {
  return std::make_unique<CollectivesSection>();
}

}  // namespace hetplan::profiler
