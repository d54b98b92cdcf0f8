// The first step of an int8 matrix product (d2lbert.fast.int8): each row of the input
// rounded to 8-bit unsigned integers with a scale and zero point of its own, in one pass
// over the input.
//
//   d2lbert_quantize(x, inverse_scales, levels=L) -> q, row_scales, zero_points
//     x: (rows, k) float32; inverse_scales: (k,) float32, 1 / c_k per column
//     q: (rows, k) uint8, q[r][c] = x[r][c] * inverse_scales[c] / row_scales[r] rounded to
//        the nearest integer (ties to even), plus zero_points[r], within [0, L]
//     row_scales: (rows,) float32, (hi - lo) / L for the row's values x * inverse_scales
//        spanning [lo, hi], widened to take 0 in (0 for a row of zeros)
//     zero_points: (rows,) int32, round(-lo / row_scale), within [0, L]: the integer 0
//        stands for
//
// A scale per input column (the columns' scales are folded into the weight's columns)
// and one per row, measured as the row is read ("dynamic"), where MXNet's quantize_v2
// has one per tensor, fixed in advance; a zero point per row, so that a row of mostly
// positive values (GELU's outputs) gets its L + 1 levels where its values are.
// d2lbert.fast.int8 takes L = 255. Inference only: its backward (which a
// hybridized graph needs registered) gives zeros.
#include <omp.h>

#include <algorithm>

#include "common.h"
#include "int8_rows.h"

using namespace d2lbert;

// inputs: x, inverse_scales; outputs: q, row_scales, zero_points
MXReturnValue quantize_forward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                               std::vector<MXTensor>* outputs, const OpResource& res) {
  MXTensor& x = (*inputs)[0];
  const int64_t k = x.shape.back(), rows = x.size() / k;
  const float levels = static_cast<float>(int_attribute(attrs, "levels", 255));
  const float* in = x.data<float>();
  const float* inverse_scales = (*inputs)[1].data<float>();
  uint8_t* q = (*outputs)[0].data<uint8_t>();
  float* row_scales = (*outputs)[1].data<float>();
  int32_t* zero_points = (*outputs)[2].data<int32_t>();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row(in + r * k, inverse_scales, k, levels, q + r * k, row_scales + r,
                 zero_points + r);
  }
  return MX_SUCCESS;
}

MXReturnValue quantize_infer_type(const Attributes& attrs, std::vector<int>* in_types,
                                  std::vector<int>* out_types) {
  if (check_types("d2lbert_quantize", *in_types) != MX_SUCCESS) return MX_FAIL;
  (*out_types) = {kUint8, kFloat32, kInt32};
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
  (*out_shapes)[2] = {x[0]};
  return MX_SUCCESS;
}

REGISTER_OP(d2lbert_quantize)
.setForward(quantize_forward, "cpu")
.setBackward(zero_gradients, "cpu")
.setParseAttrs(fixed_arity<2, 3>)
.setInferType(quantize_infer_type)
.setInferShape(quantize_infer_shape);
