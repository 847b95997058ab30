#include "costmodel/precision.h"

namespace hetplan {

std::string_view to_string(Precision p) {
  switch (p) {
    case Precision::kBf16:
      return "bf16";
    case Precision::kFp8Delayed:
      return "fp8-delayed";
    case Precision::kFp8Current:
      return "fp8-current";
    case Precision::kFp8Blockwise:
      return "fp8-blockwise";
    case Precision::kMxfp8:
      return "mxfp8";
    case Precision::kNvfp4:
      return "nvfp4";
  }
  return "?";
}

bool parse_precision(std::string_view text, Precision& out) {
  for (Precision p : kAllPrecisions)
    if (text == to_string(p)) {
      out = p;
      return true;
    }
  return false;
}

Dtype quantized_dtype(Precision p) {
  switch (p) {
    case Precision::kBf16:
      return Dtype::kBf16;
    case Precision::kNvfp4:
      return Dtype::kFp4;
    default:
      return Dtype::kFp8;
  }
}

double quantize_bytes_per_element(Precision p, double in) {
  switch (p) {
    case Precision::kBf16:
      return 0;
    case Precision::kFp8Delayed:
      // One cast-transpose kernel (TE's fused cast_transpose): reads the tensor, writes its fp8
      // copy and the copy's transpose; the amax rides in the same pass.
      return in + 2 * 1.0;
    case Precision::kFp8Current:
      // An amax pass over the tensor, then the cast-transpose.
      return in + in + 2 * 1.0;
    case Precision::kFp8Blockwise:
      // One pass quantising 1x128 blocks both ways: two fp8 copies and an fp32 scale per 128
      // elements each.
      return in + 2 * (1.0 + 4.0 / 128);
    case Precision::kMxfp8:
      // One pass quantising 32-element blocks both ways: two fp8 copies, an E8M0 scale per 32.
      return in + 2 * (1.0 + 1.0 / 32);
    case Precision::kNvfp4:
      // The per-tensor amax pass, then both orientations in fp4 (half a byte) with an E4M3 scale
      // per 16 elements (the Hadamard transform of the column-wise copy rides in that pass).
      return in + in + 2 * (0.5 + 1.0 / 16);
  }
  return 0;
}

double saved_input_bytes_per_element(Precision p) {
  switch (p) {
    case Precision::kBf16:
      return 0;
    case Precision::kFp8Delayed:
    case Precision::kFp8Current:
      return 1.0;
    case Precision::kFp8Blockwise:
      return 1.0 + 4.0 / 128;  // 1x128 blocks of activations, an fp32 scale each
    case Precision::kMxfp8:
      return 1.0 + 1.0 / 32;  // an E8M0 scale per 32 elements
    case Precision::kNvfp4:
      return 0.5 + 1.0 / 16;  // an E4M3 scale per 16 elements
  }
  return 0;
}

double weight_copy_bytes_per_element(Precision p) {
  switch (p) {
    case Precision::kBf16:
      return 0;
    case Precision::kFp8Delayed:
    case Precision::kFp8Current:
      return 2 * 1.0;  // the fp8 weight and its transpose (Hopper's fp8 GEMMs take TN only)
    case Precision::kFp8Blockwise:
      return 2 * (1.0 + 4.0 / (128 * 128));  // 128x128 blocks, an fp32 scale each
    case Precision::kMxfp8:
      return 2 * (1.0 + 1.0 / 32);
    case Precision::kNvfp4:
      return 2 * (0.5 + 1.0 / 256);  // 16x16 blocks, an E4M3 scale each
  }
  return 0;
}

}  // namespace hetplan
