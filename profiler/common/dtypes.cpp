#include "profiler/common/dtypes.h"

#include <algorithm>

#include <fmt/format.h>

#include "costmodel/errors.h"

namespace hetplan::profiler {

std::vector<Dtype> supported_dtypes(const std::vector<Dtype>& requested, int cc_major, int cc_minor,
                                    std::vector<std::string>* skipped) {
  const int cc = cc_major * 10 + cc_minor;
  std::vector<Dtype> out;
  const std::vector<Dtype> all(std::begin(kAllDtypes), std::end(kAllDtypes));
  for (Dtype d : requested.empty() ? all : requested) {
    const int needs = d == Dtype::kFp8 ? 89 : (d == Dtype::kBf16 || d == Dtype::kTf32) ? 80 : 0;
    if (cc >= needs) {
      out.push_back(d);
    } else if (skipped) {
      skipped->push_back(
          fmt::format("{} skipped: needs compute capability {}.{}, this GPU has {}.{}",
                      to_string(d), needs / 10, needs % 10, cc_major, cc_minor));
    }
  }
  return out;
}

std::vector<Dtype> parse_dtype_list(const std::string& text) {
  std::vector<Dtype> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    Dtype d;
    // fp4 has priors only: no GEMM of the sweep runs it.
    if (!parse_dtype(item, d) || d == Dtype::kFp4)
      throw InputError(
          fmt::format("--dtypes: expected a comma-separated list of fp32, tf32, "
                      "fp16, bf16, fp8; found \"{}\"",
                      item));
    if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace hetplan::profiler
