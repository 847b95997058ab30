// Low-precision recipes' byte tables and the fp4 dtype (values by hand).
#include <gtest/gtest.h>

#include <iterator>

#include "costmodel/dtype.h"
#include "costmodel/precision.h"

namespace hetplan {
namespace {

TEST(Precision, NamesAndTheFp4Dtype) {
  for (Precision p : kAllPrecisions) {
    Precision q;
    ASSERT_TRUE(parse_precision(to_string(p), q));
    EXPECT_EQ(q, p);
  }
  Precision q;
  EXPECT_FALSE(parse_precision("fp8", q));
  EXPECT_EQ(quantized_dtype(Precision::kNvfp4), Dtype::kFp4);
  EXPECT_EQ(quantized_dtype(Precision::kMxfp8), Dtype::kFp8);
  EXPECT_EQ(dtype_bytes(Dtype::kFp4), 0.5);
  Dtype d;
  ASSERT_TRUE(parse_dtype("fp4", d));
  EXPECT_EQ(d, Dtype::kFp4);
  // The measured dtypes (calibration sweeps) are still the five: fp4 has priors only.
  EXPECT_EQ(std::size(kAllDtypes), 5u);
}

TEST(Precision, QuantisationBytesPerElementOfEachRecipe) {
  // A bf16 element (2 bytes) read, and written in both orientations:
  EXPECT_EQ(quantize_bytes_per_element(Precision::kBf16), 0);
  EXPECT_EQ(quantize_bytes_per_element(Precision::kFp8Delayed), 2 + 2 * 1);      // cast-transpose
  EXPECT_EQ(quantize_bytes_per_element(Precision::kFp8Current), 2 + 2 + 2 * 1);  // amax pass first
  EXPECT_EQ(quantize_bytes_per_element(Precision::kFp8Blockwise), 2 + 2 * (1 + 4.0 / 128));
  EXPECT_EQ(quantize_bytes_per_element(Precision::kMxfp8), 2 + 2 * (1 + 1.0 / 32));
  EXPECT_EQ(quantize_bytes_per_element(Precision::kNvfp4), 2 + 2 + 2 * (0.5 + 1.0 / 16));
}

}  // namespace
}  // namespace hetplan
