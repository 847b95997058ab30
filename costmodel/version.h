// hetplan's version, CMake's project version: what `--version` prints and every file hetplan
// writes records.
#pragma once

namespace hetplan {

const char* version();

}  // namespace hetplan
