// Issue 38's GPU presets (GH200, A10G, L40S, RTX and Titan cards, A100 PCIe, MI300X): their
// datasheet figures, and another vendor's GPU marked as such (values from the cited datasheets).
#include <gtest/gtest.h>

#include "cli_test_util.h"

#include "costmodel/document.h"
#include "costmodel/errors.h"
#include "costmodel/hardware.h"

namespace hetplan {
namespace {

TEST(MoreGpus, Gh200SizesShareTheH100sCompute) {
  const GpuSpec small = load_gpu("gh200-96gb");
  const GpuSpec large = load_gpu("gh200-144gb");
  const GpuSpec h100 = load_gpu("h100-sxm");
  EXPECT_DOUBLE_EQ(small.peak_flops(Dtype::kBf16), h100.peak_flops(Dtype::kBf16));
  EXPECT_DOUBLE_EQ(large.peak_flops(Dtype::kFp8), 1978.9e12);  // 3,958 with sparsity, halved
  EXPECT_DOUBLE_EQ(small.memory_bytes, 96.0 * (1ull << 30));
  EXPECT_DOUBLE_EQ(small.memory_GBps, 4000);  // HBM3
  EXPECT_DOUBLE_EQ(large.memory_bytes, 144.0 * (1ull << 30));
  EXPECT_DOUBLE_EQ(large.memory_GBps, 4900);  // HBM3e
}

// GeForce cards run FP16/BF16 tensor math with FP32 accumulation at half the FP16-accumulate
// rate (GA102 and Ada whitepapers): the presets hold the FP32-accumulate figure training uses.
TEST(MoreGpus, ConsumerCardsCarryTheirFp32AccumulateRate) {
  EXPECT_DOUBLE_EQ(load_gpu("rtx-3090").peak_flops(Dtype::kBf16), 71e12);
  EXPECT_DOUBLE_EQ(load_gpu("rtx-4090").peak_flops(Dtype::kFp16), 165.2e12);
  EXPECT_DOUBLE_EQ(load_gpu("rtx-4090").peak_flops(Dtype::kFp8), 330.3e12);
  // Turing: no bf16 or tf32 units. TITAN RTX: 72 SMs x 8 tensor cores x 128 FLOP x 1.77 GHz.
  EXPECT_FALSE(load_gpu("rtx-2080ti").supports(Dtype::kBf16));
  EXPECT_FALSE(load_gpu("titan-rtx").supports(Dtype::kTf32));
  EXPECT_NEAR(load_gpu("titan-rtx").peak_flops(Dtype::kFp16), 72 * 8 * 128 * 1.77e9, 0.1e12);
  EXPECT_DOUBLE_EQ(load_gpu("rtx-2080ti").memory_bytes, 11.0 * (1ull << 30));
}

TEST(MoreGpus, DataCenterPcieCards) {
  // ECC on takes 1/16 of GDDR6: 24 GB -> 22.5 GiB, 48 GB -> 45 GiB.
  EXPECT_DOUBLE_EQ(load_gpu("a10g").memory_bytes, 22.5 * (1ull << 30));
  EXPECT_DOUBLE_EQ(load_gpu("l40s").memory_bytes, 45.0 * (1ull << 30));
  EXPECT_DOUBLE_EQ(load_gpu("l40s").peak_flops(Dtype::kFp8), 733e12);
  EXPECT_EQ(load_gpu("l40s").sm_count, 142);
  // The A100 PCIe has the SXM's peaks and slower memory.
  EXPECT_DOUBLE_EQ(load_gpu("a100-pcie-40gb").peak_flops(Dtype::kBf16), 312e12);
  EXPECT_DOUBLE_EQ(load_gpu("a100-pcie-40gb").memory_GBps, 1555);
  EXPECT_DOUBLE_EQ(load_gpu("a100-pcie-80gb").memory_GBps, 1935);
}

TEST(MoreGpus, AnotherVendorsGpuHasPriorsOnly) {
  const GpuSpec mi300x = load_gpu("mi300x");
  EXPECT_EQ(mi300x.vendor, "amd");
  EXPECT_FALSE(mi300x.calibratable());
  EXPECT_DOUBLE_EQ(mi300x.peak_flops(Dtype::kBf16), 1307.4e12);
  EXPECT_DOUBLE_EQ(mi300x.memory_bytes, 192.0 * (1ull << 30));
  EXPECT_EQ(mi300x.sm_count, 304);  // compute units
  // Every NVIDIA preset leaves the key out and is calibratable.
  EXPECT_EQ(load_gpu("l40s").vendor, "nvidia");
  EXPECT_TRUE(load_gpu("l40s").calibratable());
}

TEST(MoreGpus, AnUnknownVendorNamesTheKey) {
  Document doc = parse_document(
      "vendor: intel\npeak_tflops: {bf16: 100}\nmemory_gib: 32\nmemory_GBps: 1000\n"
      "sm_count: 50\nl2_mib: 10\n",
      "g.yaml", DocumentFormat::kYaml);
  try {
    parse_gpu(ObjectReader(doc), "g");
    FAIL() << "accepted vendor: intel";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "vendor");
    EXPECT_NE(std::string(e.what()).find("nvidia, amd"), std::string::npos) << e.what();
  }
}

// The node presets as the clouds sell them (figures from the cited instance pages).
TEST(MoreGpus, CloudAndSuperchipNodes) {
  const NodeSpec gh = load_node("gh200-superchip-4");
  EXPECT_EQ(gh.gpus, 4);
  EXPECT_EQ(gh.fabric, Fabric::kNvlink);
  EXPECT_DOUBLE_EQ(gh.intra_GBps, 450);    // 900 GB/s both directions, per direction
  EXPECT_DOUBLE_EQ(gh.network_gbit, 800);  // 4 x 200 Gbit/s Slingshot 11
  EXPECT_DOUBLE_EQ(gh.price_per_hour, 0);  // not rented by the hour
  EXPECT_EQ(load_node("p5e.48xlarge").gpu.name, "h200");
  EXPECT_EQ(load_node("p4de.24xlarge").gpu.name, "a100-80gb");
  EXPECT_EQ(load_node("g5.48xlarge").gpus, 8);
  EXPECT_EQ(load_node("g6e.12xlarge").gpu.name, "l40s");
  EXPECT_DOUBLE_EQ(load_node("a3-highgpu-8g").network_gbit, 1000);
  EXPECT_EQ(load_node("a2-highgpu-8g").gpu.name, "a100-40gb");
  EXPECT_EQ(load_node("g2-standard-48").gpu.name, "l4");
  for (const auto& p : hardware_presets()) {
    if (p.kind == "node") {
      EXPECT_FALSE(load_node(p.name).citations.empty()) << p.name;
    }
  }
}

// `hetplan clusters` says which GPU has priors only.
TEST(MoreGpus, ClustersListSaysPriorsOnly) {
  auto r = testing::run_hetplan("clusters");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("(amd GPU: hetplan's calibration kernels are CUDA-only"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("gh200-superchip-4"), std::string::npos);
  r = testing::run_hetplan("clusters --json");
  ASSERT_EQ(r.exit_code, 0);
  const auto j = nlohmann::json::parse(r.output);
  bool found = false;
  for (const auto& p : j)
    if (p["name"] == "mi300x") {
      found = true;
      EXPECT_EQ(p["vendor"], "amd");
      EXPECT_EQ(p["calibration"], "priors only");
    }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace hetplan
