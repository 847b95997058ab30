// The sm_90a primitives of the experimental Hopper kernels on the hardware: the wgmma operand
// forms and the mbarrier ring with bulk copies, each against a known answer that the emulator
// gives too (tests/experimental/attention_hopper_emulated_test.cpp, bulk_emulated_test.cpp).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "kernels/experimental/attention_hopper.h"
#include "kernels/experimental/bulk_selftest.h"
#include "kernels/experimental/wgmma_selftest.h"

namespace hetplan::kernels {
namespace {

bool gpu_visible() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define REQUIRE_GPU() \
  if (!gpu_visible()) GTEST_SKIP() << "no GPU visible"

// The three wgmma operand forms of the Hopper attention kernels on the hardware, against the
// answer worked out in kernels/experimental/wgmma_selftest.h (the emulator passes the same test).
// Variant 3 issues them as the kernels do (cp.async-filled tiles, one commit group per form) and
// must give the known product; a failure names the form whose descriptor the hardware reads
// otherwise than the emulator's model. The other variants (ordinary-store fill, one group for all
// three forms) are printed for the record: the first GPU run's harness was variant 0 with byte
// stores.
TEST(HopperKernelProperties, WgmmaOperandFormsGiveTheKnownProduct) {
  REQUIRE_GPU();
  if (!hopper_attention_available()) GTEST_SKIP() << "no sm_90a kernels for this device";
  for (int variant = 0; variant < kWgmmaSelftestVariants; ++variant) {
    const WgmmaSelftestReport r = wgmma_selftest_check(wgmma_selftest_run(variant));
    std::printf(
        "wgmma self-test variant %d (%s fill, %s): wrong %d / %d / %d, shared memory %s%s\n",
        variant, variant & kSelftestAsyncFill ? "cp.async" : "st.shared",
        variant & kSelftestGroupPerForm ? "group per form" : "one group", r.wrong[0], r.wrong[1],
        r.wrong[2], r.image_wrong == 0 ? "as written" : "DIFFERS", r.detail.c_str());
    if (variant == kSelftestAsyncFill + kSelftestGroupPerForm) {
      EXPECT_EQ(r.image_wrong, 0) << r.detail;
      for (int form = 0; form < kWgmmaSelftestForms; ++form)
        EXPECT_EQ(r.wrong[form], 0) << "form " << form << ":" << r.detail;
    }
  }
}

// The mbarrier ring (bulk copies into 3 stages over 8 tiles, full/empty barriers, both parities)
// and the bulk reduce of 4 blocks into one buffer (kernels/experimental/bulk_selftest.h) on the
// hardware, against exact sums; the emulator passes the same code
// (BulkEmulated.SelftestGivesTheKnownSums). A disagreement about the primitives' semantics shows as
// wrong sums or as a hang (a phase that never completes: the test then runs into the GPU session's
// step limit).
TEST(HopperKernelProperties, BulkCopyRingAndReduceGiveTheKnownSums) {
  REQUIRE_GPU();
  if (!hopper_attention_available()) GTEST_SKIP() << "no sm_90a kernels for this device";
  const BulkSelftestReport r = bulk_selftest_check(bulk_selftest_run());
  std::printf("bulk-copy self-test: %d of %d wrong%s\n", r.wrong, kBulkSelftestOutFloats,
              r.detail.c_str());
  EXPECT_EQ(r.wrong, 0) << r.detail;
}

}  // namespace
}  // namespace hetplan::kernels
