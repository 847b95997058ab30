#include "profiler/gemm/lt_gemm.h"

#include <fmt/format.h>

#include "profiler/cuda_check.h"

namespace hetplan::profiler {
namespace {

struct DescDeleter {
  void operator()(cublasLtMatmulDescOpaque_t* d) const { cublasLtMatmulDescDestroy(d); }
  void operator()(cublasLtMatrixLayoutOpaque_t* d) const { cublasLtMatrixLayoutDestroy(d); }
  void operator()(cublasLtMatmulPreferenceOpaque_t* d) const { cublasLtMatmulPreferenceDestroy(d); }
};
using MatmulDesc = std::unique_ptr<cublasLtMatmulDescOpaque_t, DescDeleter>;
using Layout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, DescDeleter>;
using Preference = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, DescDeleter>;

cudaDataType_t input_type(Dtype d) {
  switch (d) {
    case Dtype::kFp32:
    case Dtype::kTf32:
      return CUDA_R_32F;
    case Dtype::kFp16:
      return CUDA_R_16F;
    case Dtype::kBf16:
      return CUDA_R_16BF;
    case Dtype::kFp8:
      return CUDA_R_8F_E4M3;
    case Dtype::kFp4:  // never swept (profiler/common/dtypes.cpp refuses it)
      break;
  }
  return CUDA_R_32F;
}

cudaDataType_t output_type(Dtype d) { return d == Dtype::kFp8 ? CUDA_R_16BF : input_type(d); }

Layout make_layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t batch) {
  cublasLtMatrixLayout_t raw = nullptr;
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&raw, type, static_cast<uint64_t>(rows),
                                          static_cast<uint64_t>(cols), rows));
  Layout layout(raw);
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);
    const int64_t stride = rows * cols;
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(raw, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                  sizeof(count)));
    CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(raw, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                  &stride, sizeof(stride)));
  }
  return layout;
}

template <typename T>
T algo_attr(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T value{};
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &value, sizeof(value), &written) !=
      CUBLAS_STATUS_SUCCESS)
    return T{};
  return value;
}

}  // namespace

LtHandle::LtHandle() { CUBLAS_CHECK(cublasLtCreate(&handle_)); }

LtHandle::~LtHandle() {
  if (handle_) cublasLtDestroy(handle_);
}

std::string LtHandle::version() {
  const size_t v = cublasLtGetVersion();
  return fmt::format("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
}

struct LtGemm::Impl {
  cublasLtHandle_t handle = nullptr;
  MatmulDesc op;
  Layout a, b, c;
  cublasLtMatmulHeuristicResult_t heuristic{};
  bool bias_epilogue = false;
};

LtGemm::LtGemm(cublasLtHandle_t handle, Dtype dtype, const GemmShape& s, const float* scale_one,
               bool bias_epilogue)
    : impl_(std::make_unique<Impl>()) {
  impl_->handle = handle;
  const cublasComputeType_t compute =
      dtype == Dtype::kTf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  cublasLtMatmulDesc_t op = nullptr;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, compute, CUDA_R_32F));
  impl_->op.reset(op);
  const cublasOperation_t ta = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  if (dtype == Dtype::kFp8) {
    if (!s.trans_a || s.trans_b)
      throw GemmNotSupported("not supported: cuBLASLt fp8 products need the TN layout");
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                &scale_one, sizeof(scale_one)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                &scale_one, sizeof(scale_one)));
  }
  if (bias_epilogue) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                                sizeof(epilogue)));
    impl_->bias_epilogue = true;
  }
  const cudaDataType_t in = input_type(dtype);
  impl_->a = s.trans_a ? make_layout(in, s.k, s.m, s.batch) : make_layout(in, s.m, s.k, s.batch);
  impl_->b = s.trans_b ? make_layout(in, s.n, s.k, s.batch) : make_layout(in, s.k, s.n, s.batch);
  impl_->c = make_layout(output_type(dtype), s.m, s.n, s.batch);

  cublasLtMatmulPreference_t pref_raw = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref_raw));
  Preference pref(pref_raw);
  const uint64_t workspace = kGemmWorkspaceBytes;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref_raw, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace)));
  int returned = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(handle, op, impl_->a.get(), impl_->b.get(), impl_->c.get(),
                                     impl_->c.get(), pref_raw, 1, &impl_->heuristic, &returned);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED || (st == CUBLAS_STATUS_SUCCESS && returned == 0))
    throw GemmNotSupported(fmt::format("not supported: cuBLASLt {} has no algorithm for {}",
                                       LtHandle::version(), to_string(dtype)));
  CUBLAS_CHECK(st);
}

LtGemm::~LtGemm() = default;

void LtGemm::run(const void* a, const void* b, void* c, void* workspace, cudaStream_t stream,
                 const void* bias) const {
  const float alpha = 1.0f, beta = 0.0f;
  if (impl_->bias_epilogue) {
    // A host-side descriptor update: cheap, and lets one GEMM serve rotated weight sets.
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(impl_->op.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                &bias, sizeof(bias)));
  }
  CUBLAS_CHECK(cublasLtMatmul(impl_->handle, impl_->op.get(), &alpha, a, impl_->a.get(), b,
                              impl_->b.get(), &beta, c, impl_->c.get(), c, impl_->c.get(),
                              &impl_->heuristic.algo, workspace, kGemmWorkspaceBytes, stream));
}

Json LtGemm::algo_json() const {
  const auto& algo = impl_->heuristic.algo;
  return Json{{"id", algo_attr<int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID)},
              {"tile", algo_attr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID)},
              {"stages", algo_attr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID)},
              {"splitk", algo_attr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM)},
              {"reduction", algo_attr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME)},
              {"cluster_shape", algo_attr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID)},
              {"workspace_bytes", impl_->heuristic.workspaceSize},
              {"waves", impl_->heuristic.wavesCount},
              {"heuristic", "cublasLtMatmulAlgoGetHeuristic top-1"}};
}

}  // namespace hetplan::profiler
