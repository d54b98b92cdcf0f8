// The last step of an int8 matrix product (d2lbert.fast.int8), in one pass.
//
//   d2lbert_dequantize(sums, row_scales, column_scales, bias) -> y
//     sums: (rows, n) int32, the integer products; row_scales: (rows,) float32, the
//     input rows' scales (d2lbert_quantize); column_scales, bias: (n,) float32
//     y: (rows, n) float32, y[r][j] = sums[r][j] * row_scales[r] * column_scales[j] + bias[j]
//
// MXNet's own operators take three passes over the outputs (a cast, a product and a
// sum), about as long as the int8 product itself on MiniLM's feed-forward layers.
// Inference only: its backward (which a hybridized graph needs registered) gives zeros.
#include <omp.h>

#include "common.h"

using namespace d2lbert;

// inputs: sums, row_scales, column_scales, bias; outputs: y
MXReturnValue dequantize_forward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                                 std::vector<MXTensor>* outputs, const OpResource& res) {
  MXTensor& sums = (*inputs)[0];
  const int64_t n = sums.shape.back(), rows = sums.size() / n;
  const int32_t* in = sums.data<int32_t>();
  const float* row_scales = (*inputs)[1].data<float>();
  const float* column_scales = (*inputs)[2].data<float>();
  const float* bias = (*inputs)[3].data<float>();
  float* out = (*outputs)[0].data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float row_scale = row_scales[r];
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      out[r * n + j] = static_cast<float>(in[r * n + j]) * row_scale * column_scales[j] + bias[j];
    }
  }
  return MX_SUCCESS;
}

// outputs: the gradients of sums, row_scales, column_scales and bias: zeros (nothing trains through it)
MXReturnValue dequantize_backward(const Attributes& attrs, std::vector<MXTensor>* inputs,
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

MXReturnValue dequantize_infer_type(const Attributes& attrs, std::vector<int>* in_types,
                                    std::vector<int>* out_types) {
  if (check_types("d2lbert_dequantize", *in_types, {0}) != MX_SUCCESS) return MX_FAIL;
  (*out_types) = {kFloat32};
  return MX_SUCCESS;
}

MXReturnValue dequantize_infer_shape(const Attributes& attrs,
                                     std::vector<std::vector<unsigned int>>* in_shapes,
                                     std::vector<std::vector<unsigned int>>* out_shapes) {
  const auto& sums = (*in_shapes)[0];
  const std::vector<unsigned int> columns = {sums.empty() ? 0u : sums.back()};
  if (sums.size() != 2 || (*in_shapes)[1] != std::vector<unsigned int>{sums[0]} ||
      (*in_shapes)[2] != columns || (*in_shapes)[3] != columns) {
    MX_ERROR_MSG << "d2lbert_dequantize: sums (rows, n), row_scales (rows,), column_scales "
                    "and bias (n,)";
    return MX_FAIL;
  }
  (*out_shapes)[0] = sums;
  return MX_SUCCESS;
}

REGISTER_OP(d2lbert_dequantize)
.setForward(dequantize_forward, "cpu")
.setBackward(dequantize_backward, "cpu")
.setParseAttrs(fixed_arity<4, 1>)
.setInferType(dequantize_infer_type)
.setInferShape(dequantize_infer_shape);
