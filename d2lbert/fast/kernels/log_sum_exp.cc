// The log-sum-exp of each row of z + b as an MXNet extension operator.
//
//   d2lbert_log_sum_exp(z, b) -> lse
//     z: (N, C) float32, b: (C,) float32; lse: (N,), log sum_c exp(z[n, c] + b[c])
//   backward: dz[n, c] = dlse[n] * exp(z[n, c] + b[c] - lse[n]), the softmax of the
//     row recomputed from z, b and lse; db[c] = sum_n dz[n, c], summed on the way in
//     blocks of rows (common.h).
//
// The masked-LM loss (d2lbert/fast/mlm_loss.py) takes it of each part of the logits:
// one pass over them forward, one backward (MXNet's log_softmax and pick: about ten,
// with slow CPU kernels for log_softmax's backward). The bias is added here, not by
// FullyConnected, whose bias costs one more pass forward and one backward (measured:
// 9 ms of each 170 ms part at book size).
#include "common.h"

using namespace d2lbert;

namespace {

// log sum_c exp(z[c] + b[c]) of one row, in two passes (the maximum, then the sum)
float row_log_sum_exp(const float* z, const float* b, int64_t C) {
  float top = z[0] + b[0];
#pragma omp simd reduction(max : top)
  for (int64_t c = 1; c < C; ++c) top = z[c] + b[c] > top ? z[c] + b[c] : top;
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < C; ++c) sum += exp_nonpositive(z[c] + b[c] - top);
  return top + std::log(sum);
}

}  // namespace

// inputs: z, b; outputs: lse
MXReturnValue log_sum_exp_forward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                                  std::vector<MXTensor>* outputs, const OpResource& res) {
  MXTensor& z = (*inputs)[0];
  const int64_t N = z.shape[0], C = z.shape[1];
  const float* rows = z.data<float>();
  const float* b = (*inputs)[1].data<float>();
  float* lse = (*outputs)[0].data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) lse[n] = row_log_sum_exp(rows + n * C, b, C);
  return MX_SUCCESS;
}

// inputs: dlse, z, b, lse; outputs: dz, db
MXReturnValue log_sum_exp_backward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                                   std::vector<MXTensor>* outputs, const OpResource& res) {
  const float* dlse = (*inputs)[0].data<float>();
  MXTensor& z = (*inputs)[1];
  const int64_t N = z.shape[0], C = z.shape[1];
  const float* rows = z.data<float>();
  const float* b = (*inputs)[2].data<float>();
  const float* lse = (*inputs)[3].data<float>();
  float* dz = (*outputs)[0].data<float>();
  const int64_t blocks = (N + kBlockRows - 1) / kBlockRows;
  std::vector<float> block_sums(blocks * C, 0.f);  // db of each block of rows
#pragma omp parallel for schedule(static)
  for (int64_t block = 0; block < blocks; ++block) {
    float* sums = block_sums.data() + block * C;
    for (int64_t n = block * kBlockRows; n < std::min(N, (block + 1) * kBlockRows); ++n) {
      const float g = dlse[n], shift = lse[n];
      const float* row = rows + n * C;
      float* grad = dz + n * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        grad[c] = g * exp_nonpositive(row[c] + b[c] - shift);
        sums[c] += grad[c];
      }
    }
  }
  std::vector<double> db(C, 0.0);
  for (int64_t block = 0; block < blocks; ++block)
    for (int64_t c = 0; c < C; ++c) db[c] += block_sums[block * C + c];
  std::copy(db.begin(), db.end(), (*outputs)[1].data<float>());
  return MX_SUCCESS;
}

MXReturnValue log_sum_exp_infer_type(const Attributes& attrs, std::vector<int>* in_types,
                                     std::vector<int>* out_types) {
  if (check_types("d2lbert_log_sum_exp", *in_types) != MX_SUCCESS) return MX_FAIL;
  (*out_types) = {kFloat32};
  return MX_SUCCESS;
}

MXReturnValue log_sum_exp_infer_shape(const Attributes& attrs,
                                      std::vector<std::vector<unsigned int>>* in_shapes,
                                      std::vector<std::vector<unsigned int>>* out_shapes) {
  const std::vector<unsigned int>& z = (*in_shapes)[0];
  const std::vector<unsigned int>& b = (*in_shapes)[1];
  if (z.size() != 2 || z[1] == 0) {
    MX_ERROR_MSG << "d2lbert_log_sum_exp: z must be (N, C) with C > 0";
    return MX_FAIL;
  }
  if (b.size() != 1 || b[0] != z[1]) {
    MX_ERROR_MSG << "d2lbert_log_sum_exp: b must be (C,), one bias for each column of z";
    return MX_FAIL;
  }
  (*out_shapes)[0] = {z[0]};
  return MX_SUCCESS;
}

REGISTER_OP(d2lbert_log_sum_exp)
.setForward(log_sum_exp_forward, "cpu")
.setBackward(log_sum_exp_backward, "cpu")
.setParseAttrs(fixed_arity<2, 1>)
.setInferType(log_sum_exp_infer_type)
.setInferShape(log_sum_exp_infer_shape);
