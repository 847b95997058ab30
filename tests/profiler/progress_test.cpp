// Progress and ETA formatting of `hetplan calibrate`.
#include "profiler/common/progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace hetplan::profiler {
namespace {

TEST(Progress, DurationFormat) {
  EXPECT_EQ(format_duration(0.4), "0.4s");
  EXPECT_EQ(format_duration(9.94), "9.9s");
  EXPECT_EQ(format_duration(45.2), "45s");
  EXPECT_EQ(format_duration(242), "4m02s");
  EXPECT_EQ(format_duration(3900), "1h05m");
  EXPECT_EQ(format_duration(-1), "?");
}

TEST(Progress, EtaScalesEstimatesByObservedSpeed) {
  double now = 100;
  Progress p(nullptr, false, [&] { return now; });
  p.add_planned(10, 100);  // 10 items, 10 s each estimated
  EXPECT_DOUBLE_EQ(p.eta_s(), 100);
  now = 140;
  p.finished("a", 10);
  p.finished("b", 10);
  // 2 items estimated at 20 s took 40 s: the other 80 s of estimates will take 160 s.
  EXPECT_DOUBLE_EQ(p.eta_s(), 160);
  const std::string line = p.status_line();
  EXPECT_NE(line.find("2/10"), std::string::npos) << line;
  EXPECT_NE(line.find(" 20%"), std::string::npos) << line;
  EXPECT_NE(line.find("40s elapsed, ETA 2m40s"), std::string::npos) << line;
  EXPECT_NE(line.find("[####...................."), std::string::npos) << line;  // floor(24 * 0.2)
}

TEST(Progress, PlainLinesWhenNotATerminal) {
  char* buf = nullptr;
  size_t size = 0;
  std::FILE* out = open_memstream(&buf, &size);
  double now = 0;
  {
    Progress p(out, /*tty=*/false, [&] { return now; });
    p.add_planned(3, 3);
    p.start_section("gemm");
    now = 1;
    p.finished("bf16 16x16x16 TN", 1);  // under 5 s since the last line: no line
    now = 7;
    p.finished("bf16 32x32x32 TN", 1);  // a line
    now = 8;
    p.finished("bf16 64x64x64 TN", 1, true);  // the last item always prints
    p.finish();
  }
  std::fclose(out);
  const std::string text(buf, size);
  std::free(buf);
  EXPECT_EQ(text.find('\r'), std::string::npos);
  EXPECT_NE(text.find("calibrate: section gemm: "), std::string::npos) << text;
  EXPECT_EQ(text.find("16x16x16"), std::string::npos) << text;
  EXPECT_NE(text.find("2/3"), std::string::npos) << text;
  EXPECT_NE(text.find("3/3 100%"), std::string::npos) << text;
  EXPECT_NE(text.find("1 failed"), std::string::npos) << text;
}

TEST(Progress, TerminalRedrawsInPlace) {
  char* buf = nullptr;
  size_t size = 0;
  std::FILE* out = open_memstream(&buf, &size);
  double now = 0;
  {
    Progress p(out, /*tty=*/true, [&] { return now; });
    p.add_planned(2, 2);
    p.finished("x", 1);
    p.message("calibrate: a warning");
    p.finished("y", 1);
    p.finish();
  }
  std::fclose(out);
  const std::string text(buf, size);
  std::free(buf);
  EXPECT_NE(text.find("\r[############............] 1/2"), std::string::npos) << text;
  EXPECT_NE(text.find("calibrate: a warning\n"), std::string::npos) << text;
  EXPECT_EQ(text.back(), '\n');
}

}  // namespace
}  // namespace hetplan::profiler
