// Prior-only GPU types take the GEMM curve fitted to the calibrated type their priors name
// (`gemm_curve_from` in a datasheet file): every coefficient, for each dtype that type measured.
#include <gtest/gtest.h>

#include "costmodel/calibration.h"
#include "costmodel/document.h"
#include "costmodel/profile.h"

namespace hetplan {
namespace {

void expect_same_curve(const GemmEfficiency& a, const GemmEfficiency& b) {
  EXPECT_DOUBLE_EQ(a.peak_fraction, b.peak_fraction);
  EXPECT_DOUBLE_EQ(a.k_half, b.k_half);
  EXPECT_EQ(a.tile_m, b.tile_m);
  EXPECT_EQ(a.tile_n, b.tile_n);
  EXPECT_DOUBLE_EQ(a.overhead_s, b.overhead_s);
  EXPECT_DOUBLE_EQ(a.tile_exponent, b.tile_exponent);
  EXPECT_DOUBLE_EQ(a.memory_fraction, b.memory_fraction);
  EXPECT_DOUBLE_EQ(a.blend, b.blend);
  EXPECT_DOUBLE_EQ(a.wave_smoothing, b.wave_smoothing);
}

TEST(GemmCurve, ShippedPriorsTakeTheH100sMeasuredCurve) {
  const Profile p = load_profile_inputs({default_calibration_dir().string()});
  const GpuFit& h100 = p.gpus.at("h100-sxm");
  ASSERT_EQ(h100.source, "measured");
  for (const char* type : {"h200", "gh200-144gb", "b200", "gb200", "b300", "gb300"}) {
    SCOPED_TRACE(type);
    const GpuFit& fit = p.gpus.at(type);
    EXPECT_EQ(fit.gemm_curve_from, "h100-sxm");
    for (Dtype d : {Dtype::kBf16, Dtype::kFp8}) expect_same_curve(fit.gemm.at(d), h100.gemm.at(d));
  }
  // The H100 measured no fp4 GEMM (it has no fp4 units): the Blackwell fp4 prior stays the
  // datasheet's fraction, with its launch cost as the overhead.
  const GemmEfficiency& fp4 = p.gpus.at("b200").gemm.at(Dtype::kFp4);
  EXPECT_DOUBLE_EQ(fp4.peak_fraction, 0.81);
  EXPECT_DOUBLE_EQ(fp4.overhead_s, 5e-6);
  // The fitted bf16 curve is the H100's, not the prior's 0.81 on a 64-step K ramp.
  EXPECT_NE(p.gpus.at("b200").gemm.at(Dtype::kBf16).peak_fraction, 0.81);
}

TEST(GemmCurve, WithoutTheNamedCalibrationThePriorsStay) {
  const Profile p =
      load_profile_inputs({(default_calibration_dir() / "datasheet" / "b200.json").string(),
                           (default_calibration_dir() / "datasheet" / "h100-sxm.json").string()});
  // h100-sxm is there, from its datasheet only: no measured curve to take.
  const GpuFit& b200 = p.gpus.at("b200");
  EXPECT_TRUE(b200.gemm_curve_dtypes.empty());
  EXPECT_DOUBLE_EQ(b200.gemm.at(Dtype::kBf16).peak_fraction, 0.81);
  EXPECT_DOUBLE_EQ(b200.gemm.at(Dtype::kBf16).k_half, GemmEfficiency{}.k_half);
}

TEST(GemmCurve, AMalformedNameIsRefusedWithItsKey) {
  const Document doc = parse_document(R"({"format": "hetplan-calibration", "schema_version": 1,
    "context": {"source": "datasheet", "gpu_type": "b200", "date": "2026-12-02"},
    "datasheet": {"gemm_efficiency": {"bf16": 0.8}, "memory_efficiency": 0.9,
                  "kernel_launch_s": 5e-6, "attention_efficiency": 0.35, "gemm_curve_from": 3}})",
                                      "prior.json", DocumentFormat::kJson);
  try {
    calibration_from_document(doc);
    FAIL() << "accepted a number as gemm_curve_from";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("datasheet.gemm_curve_from"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace hetplan
