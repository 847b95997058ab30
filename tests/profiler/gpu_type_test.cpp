// Device name -> hetplan GPU type key. Names as nvidia-smi / cudaGetDeviceProperties report them.
#include "profiler/common/gpu_type.h"

#include <gtest/gtest.h>

#include "profiler/common/kernel_names.h"

namespace hetplan::profiler {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

std::string key(const char* name, int64_t memory_gib) {
  return gpu_type_key(name, memory_gib * kGiB).key;
}

TEST(GpuType, KnownNamesMapToPresetKeys) {
  EXPECT_EQ(key("NVIDIA H100 80GB HBM3", 80), "h100-sxm");
  EXPECT_EQ(key("NVIDIA H100 SXM5 80GB", 80), "h100-sxm");
  EXPECT_EQ(key("NVIDIA H100 PCIe", 80), "h100-pcie");
  EXPECT_EQ(key("NVIDIA H100 NVL", 94), "h100-nvl");
  EXPECT_EQ(key("NVIDIA H200", 141), "h200");
  EXPECT_EQ(key("NVIDIA A100-SXM4-40GB", 40), "a100-40gb");
  EXPECT_EQ(key("NVIDIA A100-PCIE-40GB", 40), "a100-40gb");
  EXPECT_EQ(key("NVIDIA A100-SXM4-80GB", 80), "a100-80gb");
  EXPECT_EQ(key("NVIDIA A100 80GB PCIe", 80), "a100-80gb");
  EXPECT_EQ(key("NVIDIA A100-SXM4", 80), "a100-80gb");  // no size in the name: by memory
  EXPECT_EQ(key("Tesla V100-SXM2-16GB", 16), "v100");
  EXPECT_EQ(key("Tesla V100-PCIE-32GB", 32), "v100");
  EXPECT_EQ(key("Tesla T4", 15), "t4");
  EXPECT_EQ(key("NVIDIA L4", 22), "l4");
  EXPECT_EQ(key("NVIDIA A10G", 22), "a10g");
  EXPECT_TRUE(gpu_type_key("NVIDIA H100 80GB HBM3", 80 * kGiB).known);
}

TEST(GpuType, UnknownNamesBecomeSlugs) {
  // L40S must not match "L4".
  const GpuTypeKey l40s = gpu_type_key("NVIDIA L40S", 45 * kGiB);
  EXPECT_EQ(l40s.key, "l40s");
  EXPECT_FALSE(l40s.known);
  EXPECT_EQ(key("NVIDIA GeForce RTX 4090", 24), "geforce-rtx-4090");
  EXPECT_FALSE(gpu_type_key("NVIDIA GeForce RTX 4090", 24 * kGiB).known);
  EXPECT_EQ(slug("  Tesla  P100-PCIE_16GB "), "p100-pcie-16gb");
  EXPECT_EQ(slug("???"), "unknown-gpu");
}

// Kernel names as cuBLAS, CUTLASS and cuBLASLt print them (CUPTI, Nsight).
TEST(KernelNames, TensorCoreRule) {
  EXPECT_TRUE(tensor_core_kernel(
      "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_"
      "segment_k_off_kernel__5x_cublas"));
  EXPECT_TRUE(tensor_core_kernel("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_TNT"));
  EXPECT_TRUE(tensor_core_kernel("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn"));
  EXPECT_TRUE(tensor_core_kernel("volta_h884gemm_64x64_ldg8_nn"));
  EXPECT_TRUE(tensor_core_kernel(
      "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8>"));
  EXPECT_TRUE(tensor_core_kernel("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32"));
  // SIMT fp32 paths and GEMV are not tensor-core.
  EXPECT_FALSE(tensor_core_kernel(
      "sm90_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_"
      "alignc4_execute_kernel__51a_cublas"));
  EXPECT_FALSE(tensor_core_kernel("ampere_sgemm_128x64_tn"));
  EXPECT_FALSE(tensor_core_kernel("void gemv2T_kernel_val<int, int, float, float, float, float>"));
  EXPECT_FALSE(tensor_core_kernel("void gemmSN_TN_kernel<float, 128, 16, 2, 4, 4, 4>"));
  // Helpers are not GEMMs at all.
  EXPECT_FALSE(gemm_main_kernel("void splitKreduce_kernel<32, 16, int, float, __nv_bfloat16>"));
  EXPECT_FALSE(tensor_core_kernel("void splitKreduce_kernel<32, 16, int, float, __nv_bfloat16>"));
  EXPECT_TRUE(
      any_tensor_core({"void splitKreduce_kernel<32, 16>", "nvjet_hsh_64x8_64x16_4x1_v_bz_TNN"}));
  EXPECT_FALSE(any_tensor_core({"ampere_sgemm_32x32_sliced1x4_tn"}));
}

}  // namespace
}  // namespace hetplan::profiler
