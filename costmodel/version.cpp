#include "costmodel/version.h"

namespace hetplan {

// HETPLAN_VERSION is defined for hetplan_costmodel's sources alone (costmodel/CMakeLists.txt), so
// that a new version rebuilds this library, not every target.
const char* version() { return HETPLAN_VERSION; }

}  // namespace hetplan
