// Pieces shared by the commands: loading the profile that backs the cost model, run context for
// JSON outputs, and small formatting helpers.
#pragma once

#include <string>
#include <vector>

#include "costmodel/document.h"
#include "costmodel/hardware.h"
#include "costmodel/profile.h"
#include "search/strategy.h"

namespace hetplan::cli {

// The profile for a run: the shipped calibration data (unless `no_default`), the cluster file's
// own calibration files, then `extra` paths (files or directories), better sources winning.
Profile load_run_profile(const std::vector<std::string>& extra, const ClusterSpec& cluster,
                         bool no_default);

// {"hetplan_version", "command", "date", "calibration": [origins]} for a JSON output.
Json run_context(const std::string& command, const Profile& profile);

// The node groups a strategy with explicit stages leaves idle: "idle: p3.16xlarge x32 (256 GPUs)".
std::string idle_groups_text(const ClusterSpec& cluster, const Strategy& s);

// The command line as typed (Linux /proc/self/cmdline), for a file's provenance.
std::string own_command_line();

// "1.23 s", "45.6 ms", "7.8 us".
std::string format_seconds(double s);
// "12.3 GiB".
std::string format_gib(double bytes);

// Writes JSON to a file (atomically) or, for "-", to stdout.
void write_json_output(const Json& j, const std::string& path);

}  // namespace hetplan::cli
