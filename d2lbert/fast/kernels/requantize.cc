// The handover between the two int8 products of a feed-forward block
// (d2lbert.fast.int8.Int8FeedForward), in one pass: the first product's integer sums
// scaled back to float32 (as d2lbert_dequantize does), its activation, and the result
// rounded row by row for the second product (as d2lbert_quantize does).
//
//   d2lbert_requantize(sums, row_scales, zero_points, column_scales, weight_sums, bias,
//                      inverse_scales, act='gelu', levels=L) -> q, row_scales, zero_points
//     the first six inputs as d2lbert_dequantize's: sums (rows, n) int32, the first
//     product's; inverse_scales: (n,) float32, 1 / c_k of the second product's columns
//     act: 'gelu' (exact, 0.5 x (1 + erf(x / sqrt 2))) or 'relu' (another: an error)
//     q, row_scales, zero_points: as d2lbert_quantize's of act(y), y = the first
//     product's float32 output
//
// Three separate operators write the float32 rows (rows, n) to memory twice and read
// them three times, n = 1536 on MiniLM; here each row's float32 values stay in the
// thread's buffer, in its cache. Inference only: its backward (which a hybridized graph
// needs registered) gives zeros.
#include <omp.h>

#include <algorithm>

#include "common.h"
#include "int8_rows.h"

using namespace d2lbert;

// erf(x) as the rational function x P(x^2) / Q(x^2) that Eigen's float erf evaluates
// (TVM and XLA use the same coefficients), on x clamped to [-4, 4], where erf is +-1 to
// within 2e-8: P of degree 6 and Q of 4 in x^2, no exp, one division. Its error,
// measured against double-precision erf over [-6, 6], is at most 3.3e-7; the formula
// of Abramowitz and Stegun (7.1.26, 1 - t (a1 + ... + t a5) exp(-x^2)) that oneDNN's
// gelu_erf computes erred up to 4.6e-7, and with it this operator took 1.5x as long
// (1,664 x 1,536 sums held to AVX2, the medians of five interleaved runs: 2.04 ms
// against 1.37).
inline float erf_of(float x) {
  x = std::min(std::max(x, -4.f), 4.f);
  const float x2 = x * x;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 - 2.10102402082508e-06f;
  p = p * x2 - 5.69250639462346e-05f;
  p = p * x2 - 7.34990630326855e-04f;
  p = p * x2 - 2.95459980854025e-03f;
  p = p * x2 - 1.60960333262415e-02f;
  float q = -1.45660718464996e-05f;
  q = q * x2 - 2.13374055278905e-04f;
  q = q * x2 - 1.68282697438203e-03f;
  q = q * x2 - 7.37332916720468e-03f;
  q = q * x2 - 1.42647390514189e-02f;
  return x * p / q;
}

// the activation of one row of values (n,), in place
inline void activate_row(bool relu, int64_t n, float* values) {
  if (relu) {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) values[j] = values[j] > 0.f ? values[j] : 0.f;
  } else {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) {
      values[j] = 0.5f * values[j] * (1.f + erf_of(values[j] * 0.70710678f));
    }
  }
}

// inputs: sums, row_scales, zero_points, column_scales, weight_sums, bias, inverse_scales;
// outputs: q, row_scales, zero_points
MXReturnValue requantize_forward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                                 std::vector<MXTensor>* outputs, const OpResource& res) {
  MXTensor& sums = (*inputs)[0];
  const int64_t n = sums.shape.back(), rows = sums.size() / n;
  const auto act = attrs.find("act");
  const std::string activation = act == attrs.end() ? "gelu" : act->second;
  if (activation != "gelu" && activation != "relu") {
    MX_ERROR_MSG << "d2lbert_requantize: act must be 'gelu' or 'relu', not '" << activation
                 << "'";
    return MX_FAIL;
  }
  const bool relu = activation == "relu";
  const float levels = static_cast<float>(int_attribute(attrs, "levels", 255));
  const int32_t* in = sums.data<int32_t>();
  const float* sum_row_scales = (*inputs)[1].data<float>();
  const int32_t* sum_zero_points = (*inputs)[2].data<int32_t>();
  const float* column_scales = (*inputs)[3].data<float>();
  const int32_t* weight_sums = (*inputs)[4].data<int32_t>();
  const float* bias = (*inputs)[5].data<float>();
  const float* inverse_scales = (*inputs)[6].data<float>();
  uint8_t* q = (*outputs)[0].data<uint8_t>();
  float* row_scales = (*outputs)[1].data<float>();
  int32_t* zero_points = (*outputs)[2].data<int32_t>();
#pragma omp parallel
  {
    std::vector<float> values(n);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      dequantize_row(in + r * n, sum_row_scales[r], sum_zero_points[r], column_scales,
                     weight_sums, bias, n, values.data());
      activate_row(relu, n, values.data());
      quantize_row(values.data(), inverse_scales, n, levels, q + r * n, row_scales + r,
                   zero_points + r);
    }
  }
  return MX_SUCCESS;
}

MXReturnValue requantize_infer_type(const Attributes& attrs, std::vector<int>* in_types,
                                    std::vector<int>* out_types) {
  if (check_types("d2lbert_requantize", *in_types, {0, 2, 4}) != MX_SUCCESS) return MX_FAIL;
  (*out_types) = {kUint8, kFloat32, kInt32};
  return MX_SUCCESS;
}

MXReturnValue requantize_infer_shape(const Attributes& attrs,
                                     std::vector<std::vector<unsigned int>>* in_shapes,
                                     std::vector<std::vector<unsigned int>>* out_shapes) {
  const auto& sums = (*in_shapes)[0];
  const std::vector<unsigned int> columns = {sums.empty() ? 0u : sums.back()};
  const std::vector<unsigned int> rows = {sums.empty() ? 0u : sums[0]};
  if (sums.size() != 2 || (*in_shapes)[1] != rows || (*in_shapes)[2] != rows ||
      (*in_shapes)[3] != columns || (*in_shapes)[4] != columns ||
      (*in_shapes)[5] != columns || (*in_shapes)[6] != columns) {
    MX_ERROR_MSG << "d2lbert_requantize: sums (rows, n), row_scales and zero_points (rows,), "
                    "column_scales, weight_sums, bias and inverse_scales (n,)";
    return MX_FAIL;
  }
  (*out_shapes)[0] = sums;
  (*out_shapes)[1] = rows;
  (*out_shapes)[2] = rows;
  return MX_SUCCESS;
}

REGISTER_OP(d2lbert_requantize)
.setForward(requantize_forward, "cpu")
.setBackward(zero_gradients, "cpu")
.setParseAttrs(fixed_arity<7, 3>)
.setInferType(requantize_infer_type)
.setInferShape(requantize_infer_shape);
