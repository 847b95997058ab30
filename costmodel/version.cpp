#include "costmodel/version.h"

namespace hetplan {

// HETPLAN_VERSION is defined for this file alone (costmodel/CMakeLists.txt), so that a new
// version rebuilds one object, not every target.
const char* version() { return HETPLAN_VERSION; }

std::string version_line() {
  return std::string("hetplan ") + version() + " (commit " + commit() + ")";
}

}  // namespace hetplan
