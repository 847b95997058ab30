#include "costmodel/dtype.h"

namespace hetplan {

double dtype_bytes(Dtype dtype) {
  switch (dtype) {
    case Dtype::kFp32:
    case Dtype::kTf32:
      return 4;
    case Dtype::kFp16:
    case Dtype::kBf16:
      return 2;
    case Dtype::kFp8:
      return 1;
    case Dtype::kFp4:
      return 0.5;
  }
  return 4;
}

std::string_view to_string(Dtype dtype) {
  switch (dtype) {
    case Dtype::kFp32:
      return "fp32";
    case Dtype::kTf32:
      return "tf32";
    case Dtype::kFp16:
      return "fp16";
    case Dtype::kBf16:
      return "bf16";
    case Dtype::kFp8:
      return "fp8";
    case Dtype::kFp4:
      return "fp4";
  }
  return "?";
}

bool parse_dtype(std::string_view text, Dtype& out) {
  for (Dtype d : kEveryDtype) {
    if (text == to_string(d)) {
      out = d;
      return true;
    }
  }
  return false;
}

}  // namespace hetplan
