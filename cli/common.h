// Pieces shared by the commands: loading the profile that backs the cost model and the framework,
// checking outputs, and small formatting helpers.
#pragma once

#include <string>
#include <vector>

#include "costmodel/document.h"
#include "costmodel/errors.h"
#include "costmodel/framework.h"
#include "costmodel/hardware.h"
#include "costmodel/profile.h"
#include "report/run_text.h"
#include "search/strategy.h"

namespace hetplan::cli {

// The profile for a run (costmodel/profile_sources.h, run_profile), with a note on stderr for
// each input read once though named twice.
Profile load_run_profile(const std::vector<std::string>& extra, const ClusterSpec& cluster,
                         bool no_default);

// The framework a command runs under: `flag` (its --framework), else `recorded` (what the strategy
// file `recorded_in` names), else Megatron-Core. Throws InputError naming the file and key when it
// is bad (the strategy file and its key `framework` for a recorded name).
FrameworkSpec load_run_framework(const std::string& flag, const std::string& recorded = "",
                                 const std::string& recorded_in = "");
// The help text of every command's --framework option.
inline constexpr const char* kFrameworkHelp =
    "Framework the strategy runs under: a preset (hetplan frameworks) or a framework file "
    "(default megatron-core)";

// The node groups a strategy with explicit stages leaves idle: "idle: p3.16xlarge x32 (256 GPUs)".
std::string idle_groups_text(const ClusterSpec& cluster, const Strategy& s);

// The command line as typed (Linux /proc/self/cmdline), for a file's provenance.
std::string own_command_line();

// Writes JSON to a file (atomically) or, for "-", to stdout.
void write_json_output(const Json& j, const std::string& path);

// Checks made before a command that reads `inputs` (files or folders) writes `outputs`, so that it
// fails at once with exit status 2 instead of after the work (docs/cli.md "Inputs and outputs"):
// no output is an input (the same file, also under an input folder) or another output, and each
// output's folder exists and is writable. `outputs` pairs an option with its value ("--out",
// "p.json"); empty values and "-" (stdout) are skipped. Throws InputError.
void check_outputs(const std::vector<std::string>& inputs,
                   const std::vector<std::pair<std::string, std::string>>& outputs);

// f(), with an InputError it throws that names no file (a check deep in the placement or an
// exporter, which sees the strategy but not where it was read from) rethrown naming `origin` and
// `key`; one that names its file is rethrown as it is.
template <class F>
auto naming_input(const std::string& origin, const std::string& key, F&& f) {
  try {
    return f();
  } catch (const InputError& e) {
    if (!e.origin().empty()) throw;
    throw InputError(origin, key, e.what());
  }
}

}  // namespace hetplan::cli
