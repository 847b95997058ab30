// Looks up the table (collective.h) of a collective kind.
#pragma once

#include "costmodel/calibration.h"
#include "profiler/collectives/collective.h"

namespace hetplan::profiler::coll {

// The table of a collective kind; throws RuntimeFailure for a kind without one.
const CollectiveOps& collective_ops(CollectiveKind kind);

}  // namespace hetplan::profiler::coll
