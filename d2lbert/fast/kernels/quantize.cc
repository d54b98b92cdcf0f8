// The first step of an int8 matrix product (d2lbert.fast.int8): each row of the input
// rounded to int8 with a scale of its own, in one pass over the input.
//
//   d2lbert_quantize(x, inverse_scales) -> q, row_scales
//     x: (rows, k) float32; inverse_scales: (k,) float32, 1 / c_k per column
//     q: (rows, k) int8, q[r][c] = x[r][c] * inverse_scales[c] / row_scales[r] rounded to
//        the nearest integer (ties to even), within [-127, 127]
//     row_scales: (rows,) float32, row_scales[r] = max_c |x[r][c] * inverse_scales[c]| / 127
//        (so the row's largest value becomes +-127; 0 for a row of zeros)
//
// A scale per input column (the columns' scales are folded into the weight's columns)
// and one per row, measured as the row is read ("dynamic"), where MXNet's quantize_v2
// has one per tensor, fixed in advance: d2lbert.fast.int8 says why. Inference only: its
// backward (which a hybridized graph needs registered) gives zeros.
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "common.h"

using namespace d2lbert;

// x rounded to the nearest integer, ties to even, for |x| < 2^22: adding and taking away
// 1.5 * 2^23 leaves no fraction bits (a plain sum, which vectorizes where nearbyint
// does not)
inline float round_to_integer(float x) {
  constexpr float kShift = 12582912.f;
  return (x + kShift) - kShift;
}

// one row: its int8 values into q and its scale returned
inline float quantize_row(const float* x, const float* inverse_scales, int64_t k,
                          int8_t* q) {
  float largest = 0.f;
#pragma omp simd reduction(max : largest)
  for (int64_t c = 0; c < k; ++c) largest = std::max(largest, std::fabs(x[c] * inverse_scales[c]));
  const float to_integers = largest > 0.f ? 127.f / largest : 0.f;
#pragma omp simd
  for (int64_t c = 0; c < k; ++c) {
    const float scaled = std::min(std::max(x[c] * inverse_scales[c] * to_integers, -127.f), 127.f);
    q[c] = static_cast<int8_t>(static_cast<int32_t>(round_to_integer(scaled)));
  }
  return largest / 127.f;
}

// inputs: x, inverse_scales; outputs: q, row_scales
MXReturnValue quantize_forward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                               std::vector<MXTensor>* outputs, const OpResource& res) {
  MXTensor& x = (*inputs)[0];
  const int64_t k = x.shape.back(), rows = x.size() / k;
  const float* in = x.data<float>();
  const float* inverse_scales = (*inputs)[1].data<float>();
  int8_t* q = (*outputs)[0].data<int8_t>();
  float* row_scales = (*outputs)[1].data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    row_scales[r] = quantize_row(in + r * k, inverse_scales, k, q + r * k);
  }
  return MX_SUCCESS;
}

// outputs: the gradients of x and inverse_scales: zeros (nothing trains through it)
MXReturnValue quantize_backward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                                std::vector<MXTensor>* outputs, const OpResource& res) {
  for (MXTensor& gradient : *outputs) std::fill_n(gradient.data<float>(), gradient.size(), 0.f);
  return MX_SUCCESS;
}

MXReturnValue quantize_infer_type(const Attributes& attrs, std::vector<int>* in_types,
                                  std::vector<int>* out_types) {
  if (check_types("d2lbert_quantize", *in_types) != MX_SUCCESS) return MX_FAIL;
  (*out_types) = {kInt8, kFloat32};
  return MX_SUCCESS;
}

MXReturnValue quantize_infer_shape(const Attributes& attrs,
                                   std::vector<std::vector<unsigned int>>* in_shapes,
                                   std::vector<std::vector<unsigned int>>* out_shapes) {
  const auto& x = (*in_shapes)[0];
  if (x.size() != 2 || (*in_shapes)[1] != std::vector<unsigned int>{x.back()}) {
    MX_ERROR_MSG << "d2lbert_quantize: x (rows, k), inverse_scales (k,)";
    return MX_FAIL;
  }
  (*out_shapes)[0] = x;
  (*out_shapes)[1] = {x[0]};
  return MX_SUCCESS;
}

REGISTER_OP(d2lbert_quantize)
.setForward(quantize_forward, "cpu")
.setBackward(quantize_backward, "cpu")
.setParseAttrs(fixed_arity<2, 2>)
.setInferType(quantize_infer_type)
.setInferShape(quantize_infer_shape);
