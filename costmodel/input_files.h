// Input files named more than once on one command line: directly, through a folder, by another
// path to the same file, or as a copy with the same bytes. Their records would count twice (the
// cost model sums the records of one layer), so a command refuses them or reads them once and
// says so (docs/cli.md "Inputs").
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace hetplan {

// A file that repeats an earlier input.
struct RepeatedInput {
  std::filesystem::path path;   // the later one
  std::filesystem::path first;  // the earlier one it repeats
  bool same_file = false;       // true: the same file; false: another file with the same bytes
  size_t index = 0;             // position of `path` in the list
};

// The inputs among `files` that repeat an earlier one, in order. Contents are compared only
// between regular files (a pipe is read once, by its reader).
std::vector<RepeatedInput> repeated_inputs(const std::vector<std::filesystem::path>& files);

// "b.json: the same file as a.json" or "b.json: the same content as a.json".
std::string describe(const RepeatedInput& repeat);

// Throws InputError naming the first repeated input.
void require_distinct_inputs(const std::vector<std::filesystem::path>& files);

}  // namespace hetplan
