// The last step of an int8 matrix product (d2lbert.fast.int8), in one pass.
//
//   d2lbert_dequantize(sums, row_scales, zero_points, column_scales, weight_sums, bias) -> y
//     sums: (rows, n) int32, the integer products of the quantized input rows and the
//     int8 weight; row_scales: (rows,) float32 and zero_points: (rows,) int32, the input
//     rows' (d2lbert_quantize); column_scales: (n,) float32, the weight rows' scales;
//     weight_sums: (n,) int32, each weight row's sum; bias: (n,) float32
//     y: (rows, n) float32, y[r][j] = (sums[r][j] - zero_points[r] * weight_sums[j])
//        * row_scales[r] * column_scales[j] + bias[j]
//     (the zero point's share taken away exactly, in integers)
//
// MXNet's own operators take three passes over the outputs (a cast, a product and a
// sum), about as long as the int8 product itself on MiniLM's feed-forward layers.
// Inference only: its backward (which a hybridized graph needs registered) gives zeros.
#include <omp.h>

#include "common.h"
#include "int8_rows.h"

using namespace d2lbert;

// inputs: sums, row_scales, zero_points, column_scales, weight_sums, bias; outputs: y
MXReturnValue dequantize_forward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                                 std::vector<MXTensor>* outputs, const OpResource& res) {
  MXTensor& sums = (*inputs)[0];
  const int64_t n = sums.shape.back(), rows = sums.size() / n;
  const int32_t* in = sums.data<int32_t>();
  const float* row_scales = (*inputs)[1].data<float>();
  const int32_t* zero_points = (*inputs)[2].data<int32_t>();
  const float* column_scales = (*inputs)[3].data<float>();
  const int32_t* weight_sums = (*inputs)[4].data<int32_t>();
  const float* bias = (*inputs)[5].data<float>();
  float* out = (*outputs)[0].data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(in + r * n, row_scales[r], zero_points[r], column_scales, weight_sums, bias,
                   n, out + r * n);
  }
  return MX_SUCCESS;
}

MXReturnValue dequantize_infer_type(const Attributes& attrs, std::vector<int>* in_types,
                                    std::vector<int>* out_types) {
  if (check_types("d2lbert_dequantize", *in_types, {0, 2, 4}) != MX_SUCCESS) return MX_FAIL;
  (*out_types) = {kFloat32};
  return MX_SUCCESS;
}

MXReturnValue dequantize_infer_shape(const Attributes& attrs,
                                     std::vector<std::vector<unsigned int>>* in_shapes,
                                     std::vector<std::vector<unsigned int>>* out_shapes) {
  const auto& sums = (*in_shapes)[0];
  const std::vector<unsigned int> columns = {sums.empty() ? 0u : sums.back()};
  if (sums.size() != 2 || (*in_shapes)[1] != std::vector<unsigned int>{sums[0]} ||
      (*in_shapes)[2] != std::vector<unsigned int>{sums[0]} || (*in_shapes)[3] != columns ||
      (*in_shapes)[4] != columns || (*in_shapes)[5] != columns) {
    MX_ERROR_MSG << "d2lbert_dequantize: sums (rows, n), row_scales and zero_points (rows,), "
                    "column_scales, weight_sums and bias (n,)";
    return MX_FAIL;
  }
  (*out_shapes)[0] = sums;
  return MX_SUCCESS;
}

REGISTER_OP(d2lbert_dequantize)
.setForward(dequantize_forward, "cpu")
.setBackward(zero_gradients, "cpu")
.setParseAttrs(fixed_arity<6, 1>)
.setInferType(dequantize_infer_type)
.setInferShape(dequantize_infer_shape);
