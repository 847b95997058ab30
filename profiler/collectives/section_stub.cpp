// Placeholder for the NCCL section (issue 6): profiler/collectives/ defines
// make_collectives_section() there; delete this file when that lands. Until then `--collectives`
// plans nothing and says so.
#include "profiler/section.h"

namespace hetplan::profiler {
namespace {

class CollectivesPlaceholder : public Section {
 public:
  std::string name() const override { return "collectives"; }
  std::vector<PlanItem> plan(SectionContext& ctx) override {
    ctx.progress.message("calibrate: collectives: not in this build yet (issue 6); skipped");
    return {};
  }
  Json measure(const PlanItem&, SectionContext&) override { return Json(); }
};

}  // namespace

std::unique_ptr<Section> make_collectives_section() {
  return std::make_unique<CollectivesPlaceholder>();
}

}  // namespace hetplan::profiler
