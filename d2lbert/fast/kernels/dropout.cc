// Dropout as an MXNet extension operator, with the hash-based mask of common.h.
//
//   d2lbert_dropout(x, training, dropout) -> (y, seed)
//     x, y: (..., H); y = x * mask / (1 - p) while training, x otherwise
//     seed: (2,) int32, from which backward rebuilds the mask: dx = dy * mask / (1 - p)
//
// MXNet 1.9's CPU Dropout draws a Mersenne-Twister number per element (about 3 ns)
// and keeps a float32 mask for backward; this hashes (seed, row, column) instead.
// Element (row, column) of the mask depends on its own position only, not on how
// many rows x has.
#include <omp.h>

#include "common.h"

using namespace d2lbert;

namespace {

// out = in * mask, row by row (mask recomputed from the seed); a copy if inactive
void apply_mask(const Dropout& dropout, const float* in, int64_t rows, int64_t H, float* out) {
  if (!dropout.active()) {
    std::copy(in, in + rows * H, out);
    return;
  }
#pragma omp parallel
  {
    std::vector<float> mask(H);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      dropout.row_mask(r, static_cast<int>(H), mask.data());
      for (int64_t j = 0; j < H; ++j) out[r * H + j] = in[r * H + j] * mask[j];
    }
  }
}

}  // namespace

// inputs: x, training; outputs: y, seed
MXReturnValue dropout_forward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                              std::vector<MXTensor>* outputs, const OpResource& res) {
  Dropout dropout = dropout_of(attrs, (*inputs)[1]);
  draw_seed(res, &dropout, &(*outputs)[1]);
  const MXTensor& x = (*inputs)[0];
  apply_mask(dropout, (*inputs)[0].data<float>(), x.size() / x.shape.back(), x.shape.back(),
             (*outputs)[0].data<float>());
  return MX_SUCCESS;
}

// inputs: dy, dseed (unused), x, training, y, seed; outputs: dx, dtraining (0)
MXReturnValue dropout_backward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                               std::vector<MXTensor>* outputs, const OpResource& res) {
  const Dropout dropout = saved_dropout(attrs, (*inputs)[3], (*inputs)[5]);
  const MXTensor& dy = (*inputs)[0];
  apply_mask(dropout, (*inputs)[0].data<float>(), dy.size() / dy.shape.back(),
             dy.shape.back(), (*outputs)[0].data<float>());
  (*outputs)[1].data<float>()[0] = 0.f;
  return MX_SUCCESS;
}

MXReturnValue dropout_infer_type(const Attributes& attrs, std::vector<int>* in_types,
                                 std::vector<int>* out_types) {
  if (check_types("d2lbert_dropout", *in_types) != MX_SUCCESS) return MX_FAIL;
  (*out_types) = {kFloat32, kInt32};
  return MX_SUCCESS;
}

MXReturnValue dropout_infer_shape(const Attributes& attrs,
                                  std::vector<std::vector<unsigned int>>* in_shapes,
                                  std::vector<std::vector<unsigned int>>* out_shapes) {
  if ((*in_shapes)[0].empty() || (*in_shapes)[1] != std::vector<unsigned int>{1}) {
    MX_ERROR_MSG << "d2lbert_dropout: x must have at least one axis, training shape (1,)";
    return MX_FAIL;
  }
  (*out_shapes)[0] = (*in_shapes)[0];
  (*out_shapes)[1] = {2};
  return MX_SUCCESS;
}

REGISTER_OP(d2lbert_dropout)
.setForward(dropout_forward, "cpu")
.setBackward(dropout_backward, "cpu")
.setParseAttrs(fixed_arity<2, 2>)
.setInferType(dropout_infer_type)
.setInferShape(dropout_infer_shape);
