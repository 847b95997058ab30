// The text `hetplan predict` and `hetplan search` print, rendered from the JSON documents they
// write (report/run_documents.h), so that what a user reads and what a script reads cannot
// disagree; and the small formats the other commands share.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "costmodel/document.h"
#include "search/strategy.h"

namespace hetplan {

// "1.23 s", "45.6 ms", "7.8 us".
std::string format_seconds(double s);
// "12.3 GiB".
std::string format_gib(double bytes);
// A prediction's breakdown as "  compute 12.09 s  tp_comm 783.77 ms ...": cp_comm, ep_comm,
// host_sync and host_wait only where they take time (the JSON has every key).
std::string breakdown_text(const Prediction& p);

// The most characters the search table's stage column takes before it is cut short.
inline constexpr size_t kStageColumnWidth = 60;

// Layers per (virtual) stage in model order, consecutive stages of one GPU type under its name:
// "a100-40gb 14 | t4 1,1 | a100-40gb 10". A run of three or more stages of one count is written
// "6(x4)" (four stages of 6 layers). Past `width` characters the list ends at the last stage that
// fits, with "... +N stages".
std::string stage_layers_summary(const std::vector<StagePrediction>& stages,
                                 size_t width = kStageColumnWidth);

// A hetplan-prediction document as predict prints it: the strategy, the totals, the breakdown,
// the stage table and the notes.
std::string prediction_text(const Json& document);

// A hetplan-search document as search prints it: the ranked table with the best plan's breakdown
// and notes (or why nothing fits and the closest plans) ...
std::string search_table_text(const Json& document);
// ... and the search's counts: candidates, costed, pruned and infeasible by reason, time limit.
std::string search_counts_text(const Json& document);
// ... and, where the document has one (`search --mixed-replicas`), the best plan with replica
// groups against the best uniform plan, group by group; "" otherwise.
std::string mixed_replicas_text(const Json& document);

}  // namespace hetplan
