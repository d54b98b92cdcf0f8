// The log-sum-exp of each row of z + b as an MXNet extension operator.
//
//   d2lbert_log_sum_exp(z, b) -> lse
//     z: (N, C) float32 or bfloat16, b: (C,) float32; lse: (N,) float32,
//     log sum_c exp(z[n, c] + b[c]), computed in float32
//   backward: dz[n, c] = dlse[n] * exp(z[n, c] + b[c] - lse[n]), the softmax of the
//     row recomputed from z, b and lse, in z's type; db[c] = sum_n dz[n, c] (float32),
//     summed on the way in blocks of rows (common.h).
//
// Under --precision bf16 the masked-LM products come out of oneDNN in bfloat16 and
// their gradient goes back into it in bfloat16: taking and giving them in bfloat16
// here saves casting the largest arrays of the step (104 million logits at book size)
// to float32 and back, and keeping a float32 copy of them for the backward pass.
// MXNet 1.9's extension API has no bfloat16 (the kernel library is built with a
// lib_api.cc that lets it through, kernels/__init__.py); the kernel reads and writes
// the raw 16-bit words (common.h's Bfloat16).
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
template <typename T>
float row_log_sum_exp(const T* z, const float* b, int64_t C) {
  float top = to_float(z[0]) + b[0];
#pragma omp simd reduction(max : top)
  for (int64_t c = 1; c < C; ++c) {
    const float v = to_float(z[c]) + b[c];
    top = v > top ? v : top;
  }
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < C; ++c) sum += exp_nonpositive(to_float(z[c]) + b[c] - top);
  return top + std::log(sum);
}

template <typename T>
void forward(const T* rows, const float* b, float* lse, int64_t N, int64_t C) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) lse[n] = row_log_sum_exp(rows + n * C, b, C);
}

template <typename T>
void backward(const float* dlse, const T* rows, const float* b, const float* lse, T* dz,
              float* db_out, int64_t N, int64_t C) {
  BlockSums db(C, N);  // common.h
#pragma omp parallel for schedule(static)
  for (int64_t block = 0; block < db.blocks(); ++block) {
    float* sums = db.of(block);
    for (int64_t n = block * kBlockRows; n < std::min(N, (block + 1) * kBlockRows); ++n) {
      const float g = dlse[n], shift = lse[n];
      const T* row = rows + n * C;
      T* grad = dz + n * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        const float value = g * exp_nonpositive(to_float(row[c]) + b[c] - shift);
        grad[c] = from_float<T>(value);
        sums[c] += value;
      }
    }
  }
  db.write(0, C, db_out);
}

}  // namespace

// inputs: z, b; outputs: lse
MXReturnValue log_sum_exp_forward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                                  std::vector<MXTensor>* outputs, const OpResource& res) {
  MXTensor& z = (*inputs)[0];
  const int64_t N = z.shape[0], C = z.shape[1];
  const float* b = (*inputs)[1].data<float>();
  float* lse = (*outputs)[0].data<float>();
  if (z.dtype == kBfloat16)
    forward(static_cast<const Bfloat16*>(z.data_ptr), b, lse, N, C);
  else
    forward(z.data<float>(), b, lse, N, C);
  return MX_SUCCESS;
}

// inputs: dlse, z, b, lse; outputs: dz (z's type), db
MXReturnValue log_sum_exp_backward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                                   std::vector<MXTensor>* outputs, const OpResource& res) {
  const float* dlse = (*inputs)[0].data<float>();
  MXTensor& z = (*inputs)[1];
  const int64_t N = z.shape[0], C = z.shape[1];
  const float* b = (*inputs)[2].data<float>();
  const float* lse = (*inputs)[3].data<float>();
  float* db = (*outputs)[1].data<float>();
  if (z.dtype == kBfloat16)
    backward(dlse, static_cast<const Bfloat16*>(z.data_ptr), b, lse,
             static_cast<Bfloat16*>((*outputs)[0].data_ptr), db, N, C);
  else
    backward(dlse, z.data<float>(), b, lse, (*outputs)[0].data<float>(), db, N, C);
  return MX_SUCCESS;
}

MXReturnValue log_sum_exp_infer_type(const Attributes& attrs, std::vector<int>* in_types,
                                     std::vector<int>* out_types) {
  if ((*in_types)[0] == kBfloat16 && (*in_types)[1] == kFloat32) {
    // z in bfloat16, b in float32: fine
  } else if (check_types("d2lbert_log_sum_exp", *in_types) != MX_SUCCESS) {
    return MX_FAIL;
  }
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
