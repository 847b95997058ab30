// What predict and search print is rendered from the JSON documents they write
// (report/run_text.h): the same figures, in the evaluator's order.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "costmodel/cost_model.h"
#include "costmodel/model.h"
#include "report/run_documents.h"
#include "report/run_text.h"
#include "search/evaluate.h"
#include "search/search.h"
#include "tests/framework_fixture.h"

namespace hetplan {
namespace {

size_t position(const std::string& text, const std::string& part) {
  const size_t at = text.find(part);
  EXPECT_NE(at, std::string::npos) << part << " not in:\n" << text;
  return at;
}

TEST(RunText, PredictionPrintsTheDocumentsFiguresInTheEvaluatorsOrder) {
  const ModelSpec model = load_model("gpt2-medium");
  const ClusterSpec cluster = load_cluster("p4d.24xlarge:1");
  const CostModel cost(Profile{}, cluster);
  const Evaluator ev(model, cluster, cost, testing::fixture_framework());
  Strategy s;
  s.dp = 2;
  s.tp = 2;
  s.pp = 2;
  s.micro_batch = 2;
  s.global_batch = 16;
  const Prediction p = ev.predict(s);
  ASSERT_TRUE(p.feasible) << p.reason;
  ASSERT_EQ(p.breakdown.size(), kBreakdownParts.size());
  for (size_t i = 0; i < p.breakdown.size(); ++i)
    EXPECT_EQ(p.breakdown[i].first, kBreakdownParts[i]);

  const RunDocumentInputs in{run_context("predict", Profile{}),
                             "gpt2-medium",
                             "p4d.24xlarge:1",
                             model,
                             cluster,
                             ev.framework()};
  const Json doc = prediction_document(in, s, p);
  EXPECT_EQ(doc["cluster_gpus"], 8);
  const std::string text = prediction_text(doc);
  EXPECT_NE(text.find(fmt::format("iteration {}", format_seconds(p.iteration_s))),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(fmt::format("{:.0f} tokens/s", p.tokens_per_s)), std::string::npos);
  // The JSON object sorts its keys; the text lists the parts as the evaluator does.
  EXPECT_LT(position(text, "compute"), position(text, "tp_comm"));
  EXPECT_LT(position(text, "tp_comm"), position(text, "pp_p2p"));
  EXPECT_LT(position(text, "pp_bubble"), position(text, "dp_sync"));
  EXPECT_LT(position(text, "dp_sync"), position(text, "optimizer"));
  EXPECT_EQ(text.find("cp_comm"), std::string::npos);  // shown only where it takes time
  // One row per stage, with its memory.
  EXPECT_NE(text.find(format_gib(p.stages[1].memory.total())), std::string::npos);
}

TEST(RunText, SearchWithNothingThatFitsSaysWhyFromTheDocument) {
  const ModelSpec model = load_model("gpt3-175b");
  const ClusterSpec cluster = load_cluster("p4d.24xlarge:1");
  const CostModel cost(Profile{}, cluster);
  const Evaluator ev(model, cluster, cost, testing::fixture_framework());
  SearchOptions o;
  o.global_batch = 8;
  const SearchResult r = search_training(ev, o);
  ASSERT_TRUE(r.top.empty());
  ASSERT_GT(r.min_static_bytes, 0);
  const RunDocumentInputs in{run_context("search", Profile{}),
                             "gpt3-175b",
                             "p4d.24xlarge:1",
                             model,
                             cluster,
                             ev.framework()};
  const Json doc = search_document(in, 8, r);
  const std::string table = search_table_text(doc);
  EXPECT_EQ(table.rfind("no feasible strategy.\n", 0), 0u) << table;
  EXPECT_NE(table.find(fmt::format("need at least {} per GPU", format_gib(r.min_static_bytes))),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("spread over all 8 GPUs"), std::string::npos);
  const std::string counts = search_counts_text(doc);
  EXPECT_NE(counts.find(fmt::format("\n{} candidates, {} costed (0 feasible)", r.stats.candidates,
                                    r.stats.evaluated)),
            std::string::npos)
      << counts;
  EXPECT_NE(counts.find("memory_bound"), std::string::npos) << counts;

  // The same search stopped by its time limit: what was not costed is not called infeasible.
  Json stopped = doc;
  stopped["stats"]["time_limit_reached"] = true;
  stopped["stats"]["time_limit_s"] = 0.5;
  const std::string cut = search_table_text(stopped);
  EXPECT_EQ(cut.rfind(fmt::format("no feasible strategy found before the time limit (500.00 ms): "
                                  "{} of {} candidates costed, none feasible; a longer "
                                  "--time-limit costs the rest.\n",
                                  r.stats.evaluated, r.stats.candidates),
                      0),
            0u)
      << cut;
  EXPECT_EQ(cut.find("need at least"), std::string::npos) << cut;
}

}  // namespace
}  // namespace hetplan
