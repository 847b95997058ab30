#include "costmodel/install_paths.h"

#include <system_error>

namespace hetplan {

// HETPLAN_SOURCE_DIR is defined for this file alone (costmodel/CMakeLists.txt): an absolute path
// on every compile line would keep ccache from sharing objects between checkouts.
std::filesystem::path data_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto installed = exe.parent_path().parent_path() / kInstalledDataDir;
    if (std::filesystem::is_directory(installed / "calibration_data", ec)) return installed;
  }
  return HETPLAN_SOURCE_DIR;
}

}  // namespace hetplan
