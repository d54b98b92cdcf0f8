// The first step of an int8 matrix product (d2lbert.fast.int8), in one pass.
//
//   d2lbert_quantize(x, inverse_scales) -> q
//     x: (rows, k) float32; inverse_scales: (k,) float32
//     q: (rows, k) int8, q[r][c] = x[r][c] * inverse_scales[c] rounded to the nearest
//        integer (ties to even) and clipped to [-127, 127]
//
// A scale per input column (per channel) instead of MXNet's quantize_v2's one per
// tensor: the columns' scales are folded into the weight's columns (d2lbert.fast.int8
// says why). Inference only: its backward (which a hybridized graph needs registered)
// gives zeros.
#include <omp.h>

#include <cmath>

#include "common.h"

using namespace d2lbert;

// inputs: x, inverse_scales; outputs: q
MXReturnValue quantize_forward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                               std::vector<MXTensor>* outputs, const OpResource& res) {
  MXTensor& x = (*inputs)[0];
  const int64_t k = x.shape.back(), rows = x.size() / k;
  const float* in = x.data<float>();
  const float* inverse_scales = (*inputs)[1].data<float>();
  int8_t* out = (*outputs)[0].data<int8_t>();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < k; ++c) {
      float scaled = std::nearbyint(in[r * k + c] * inverse_scales[c]);
      out[r * k + c] = static_cast<int8_t>(std::fmin(std::fmax(scaled, -127.f), 127.f));
    }
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
  (*out_types) = {kInt8};
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
  return MX_SUCCESS;
}

REGISTER_OP(d2lbert_quantize)
.setForward(quantize_forward, "cpu")
.setBackward(quantize_backward, "cpu")
.setParseAttrs(fixed_arity<2, 1>)
.setInferType(quantize_infer_type)
.setInferShape(quantize_infer_shape);
