// One row of an int8 product's input rounded to 8-bit unsigned integers, and one row of
// its integer sums scaled back to float32 (d2lbert_quantize, d2lbert_dequantize and
// d2lbert_requantize, which does both); their backward.
#pragma once

#include <algorithm>
#include <cstdint>

#include "common.h"

namespace d2lbert {

// The backward of an inference-only operator, which a hybridized graph needs
// registered: every gradient zero (nothing trains through it).
inline MXReturnValue zero_gradients(const Attributes& attrs, std::vector<MXTensor>* inputs,
                                    std::vector<MXTensor>* outputs, const OpResource& res) {
  for (MXTensor& gradient : *outputs) {
    if (gradient.dtype == kInt32) {
      std::fill_n(gradient.data<int32_t>(), gradient.size(), 0);
    } else {
      std::fill_n(gradient.data<float>(), gradient.size(), 0.f);
    }
  }
  return MX_SUCCESS;
}

// x rounded to the nearest integer, ties to even, for |x| < 2^22: adding and taking away
// 1.5 * 2^23 leaves no fraction bits (a plain sum, which vectorizes where nearbyint
// does not)
inline float round_to_integer(float x) {
  constexpr float kShift = 12582912.f;
  return (x + kShift) - kShift;
}

// one row: its values into q, its scale and zero point returned
inline void quantize_row(const float* x, const float* inverse_scales, int64_t k, float levels,
                         uint8_t* q, float* row_scale, int32_t* zero_point) {
  float lo = 0.f, hi = 0.f;
#pragma omp simd reduction(min : lo) reduction(max : hi)
  for (int64_t c = 0; c < k; ++c) {
    const float value = x[c] * inverse_scales[c];
    lo = std::min(lo, value);
    hi = std::max(hi, value);
  }
  const float scale = (hi - lo) / levels;
  const float to_integers = scale > 0.f ? 1.f / scale : 0.f;
  const float zero = round_to_integer(-lo * to_integers);
#pragma omp simd
  for (int64_t c = 0; c < k; ++c) {
    const float level = round_to_integer(x[c] * inverse_scales[c] * to_integers) + zero;
    q[c] = static_cast<uint8_t>(static_cast<int32_t>(std::min(std::max(level, 0.f), levels)));
  }
  *row_scale = scale;
  *zero_point = static_cast<int32_t>(zero);
}

// one row of sums (n,) scaled back into y (n,): (sums[j] - zero_point * weight_sums[j])
// * row_scale * column_scales[j] + bias[j] (the zero point's share taken away exactly,
// in integers)
inline void dequantize_row(const int32_t* sums, float row_scale, int32_t zero_point,
                           const float* column_scales, const int32_t* weight_sums,
                           const float* bias, int64_t n, float* y) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) {
    const int32_t sum = sums[j] - zero_point * weight_sums[j];
    y[j] = static_cast<float>(sum) * row_scale * column_scales[j] + bias[j];
  }
}

}  // namespace d2lbert
