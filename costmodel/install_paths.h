// Where hetplan finds the files it ships (calibration_data/, the reference harness under
// scripts/, examples/) at run time: an installed hetplan's share folder, else the source tree it
// was built from.
#pragma once

#include <filesystem>

namespace hetplan {

// <prefix>/share/hetplan when the running executable is <prefix>/bin/hetplan and that folder holds
// calibration_data/ (`cmake --install`, the Debian package); else the source tree of this build.
std::filesystem::path data_dir();

// The share folder that `cmake --install` fills, relative to the install prefix.
inline constexpr const char* kInstalledDataDir = "share/hetplan";

}  // namespace hetplan
