// Writing result files atomically: what every writer of an output (calibration, profile and
// measurements files, --json, exports, reports) uses, so that an interrupted write never leaves
// half a file.
#pragma once

#include <filesystem>
#include <string>

#include "costmodel/document.h"

namespace hetplan {

// Writes `text` atomically (a temporary file beside the target, then a rename), shared by every
// writer of result files, so that an interrupted write never leaves half a file. A symbolic link
// is followed: the file it leads to is replaced, and the link stays. A device or pipe
// (/dev/null, /dev/stdout) is written in place.
void write_text_atomically(const std::string& text, const std::filesystem::path& path);
// The same for JSON (indented one space, with a final newline).
void write_json_atomically(const Json& json, const std::filesystem::path& path);
// The file a write to `path` replaces: `path`, or where its chain of symbolic links leads (which
// need not exist yet). Throws RuntimeFailure for a loop of links.
std::filesystem::path write_target(const std::filesystem::path& path);

}  // namespace hetplan
