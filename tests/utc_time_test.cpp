// The one UTC timestamp formatter (costmodel/utc_time.h), which calibration files, reports and
// every JSON output's context record.
#include <chrono>
#include <ctime>
#include <regex>

#include <gtest/gtest.h>

#include "costmodel/utc_time.h"

namespace hetplan {
namespace {

TEST(UtcTime, IsIso8601ToTheSecondAndNow) {
  const std::string t = utc_now_iso8601();
  ASSERT_TRUE(std::regex_match(t, std::regex(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z)"))) << t;
  std::tm tm{};
  ASSERT_NE(strptime(t.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm), nullptr);
  const std::time_t parsed = timegm(&tm);
  const std::time_t now = std::time(nullptr);
  EXPECT_LE(std::abs(static_cast<double>(now - parsed)), 2.0);
}

}  // namespace
}  // namespace hetplan
