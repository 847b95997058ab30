// The framework most tests predict under (tests/data/framework_fixture.yaml): what hetplan modelled
// before frameworks were data (every schedule it simulates, every switch, Megatron-LM's memory
// layout, no host cost), so that tests of schedules, partitions and costs are not tests of one
// framework's limits. Tests of a framework load it by name.
#pragma once

#include <string>

#include "costmodel/framework.h"

namespace hetplan::testing {

inline const FrameworkSpec& fixture_framework() {
  static const FrameworkSpec kFixture =
      load_framework(std::string(HETPLAN_TEST_DATA) + "/framework_fixture.yaml");
  return kFixture;
}

}  // namespace hetplan::testing
