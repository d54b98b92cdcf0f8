// LayerNorm over the last axis, forward and backward, as MXNet extension operators:
// on its own, and fused with the dropout and residual connection that precede it in
// every Transformer block ("add & norm").
//
//   d2lbert_layer_norm(x, gamma, beta, eps) -> (y, mean, rstd)
//     x, y: (..., H); gamma, beta: (H,); mean, rstd: (rows,), rows = x.size / H
//     y = (x - mean) * rstd * gamma + beta,   rstd = 1 / sqrt(var + eps)
//
//   d2lbert_add_layer_norm(x, z, gamma, beta, training, eps, dropout)
//       -> (y, mean, rstd, seed)
//     y = LayerNorm(x + dropout(z)); x, z, y: (..., H); seed: (2,) int32, the dropout
//     mask's seed (common.h), from which backward rebuilds the mask and x + dropout(z)
//     z may be bfloat16 (--precision bf16: the sublayer's output as oneDNN wrote it);
//     dz is then bfloat16 too, the rest float32: the sum is formed in float32, and
//     the sublayer's output is never cast on its own.
//
// Backward, with xhat = (x - mean) * rstd and g = dy * gamma (per row, means over H):
//     dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//     dgamma = sum over rows of dy * xhat,  dbeta = sum over rows of dy
// and for add & norm, dz = dx * mask / (1 - p).
//
// MXNet 1.9's own CPU LayerNorm backward is a chain of generic reductions (about 1 ns
// per element for the gamma/beta sums alone); here each row is read once or twice
// while it is in cache, and the gamma/beta sums are per-block partial sums.
// MXNet hands an extension operator no write request (write or add), so the outputs
// are always overwritten; d2lbert's blocks route the inputs through `identity` so
// that MXNet adds into gradient buffers where it should.
#include <omp.h>

#include "common.h"

using namespace d2lbert;

namespace {

// y = (s - mean) * rstd * gamma + beta for one row of H values
void normalize_row(const float* s, const float* gamma, const float* beta, int64_t H,
                   float eps, float* y, float* mean, float* rstd) {
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < H; ++j) sum += s[j];
  const float m = sum / H;
  float squares = 0.f;
#pragma omp simd reduction(+ : squares)
  for (int64_t j = 0; j < H; ++j) squares += (s[j] - m) * (s[j] - m);
  const float rs = 1.f / std::sqrt(squares / H + eps);
  for (int64_t j = 0; j < H; ++j) y[j] = (s[j] - m) * rs * gamma[j] + beta[j];
  *mean = m;
  *rstd = rs;
}

// dgamma and dbeta of every row, in BlockSums (common.h) of width 2H: dgamma's H
// numbers, then dbeta's
void write_parameter_gradients(const BlockSums& sums, int64_t H, float* dgamma,
                               float* dbeta) {
  sums.write(0, H, dgamma);
  sums.write(H, H, dbeta);
}

// ds for one row from dy, given the row's input s; adds to the dgamma/dbeta partial sums
void normalize_row_backward(const float* dy, const float* s, float mean, float rstd,
                            const float* gamma, int64_t H, float* xhat, float* g,
                            float* dgamma, float* dbeta, float* ds) {
  float mean_g = 0.f, mean_g_xhat = 0.f;
#pragma omp simd reduction(+ : mean_g, mean_g_xhat)
  for (int64_t j = 0; j < H; ++j) {
    xhat[j] = (s[j] - mean) * rstd;
    g[j] = dy[j] * gamma[j];
    mean_g += g[j];
    mean_g_xhat += g[j] * xhat[j];
    dgamma[j] += dy[j] * xhat[j];
    dbeta[j] += dy[j];
  }
  mean_g /= H;
  mean_g_xhat /= H;
  for (int64_t j = 0; j < H; ++j) ds[j] = rstd * (g[j] - mean_g - xhat[j] * mean_g_xhat);
}

// s = x + z * mask for one row (mask: 1 / (1 - p) or 0 while training, else 1)
template <typename T>
void add_dropped(const Dropout& dropout, int64_t row, const float* x, const T* z,
                 int64_t H, float* mask, float* s) {
  if (dropout.active()) {
    dropout.row_mask(row, static_cast<int>(H), mask);
    for (int64_t j = 0; j < H; ++j) s[j] = x[j] + to_float(z[j]) * mask[j];
  } else {
    for (int64_t j = 0; j < H; ++j) s[j] = x[j] + to_float(z[j]);
  }
}

int64_t rows_of(const MXTensor& x) { return x.size() / x.shape.back(); }

// add & norm forward with z of type T (float or Bfloat16)
template <typename T>
void add_layer_norm_rows(const Dropout& dropout, const float* x, const T* z,
                         const float* gamma, const float* beta, int64_t H, int64_t rows,
                         float eps, float* y, float* mean, float* rstd) {
#pragma omp parallel
  {
    std::vector<float> mask(H), s(H);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      add_dropped(dropout, r, x + r * H, z + r * H, H, mask.data(), s.data());
      normalize_row(s.data(), gamma, beta, H, eps, y + r * H, mean + r, rstd + r);
    }
  }
}

// add & norm backward with z and dz of type T (float or Bfloat16)
template <typename T>
void add_layer_norm_rows_backward(const Dropout& dropout, const float* dy, const float* x,
                                  const T* z, const float* gamma, const float* mean,
                                  const float* rstd, int64_t H, int64_t rows, float* dx,
                                  T* dz, BlockSums* partial) {
#pragma omp parallel
  {
    std::vector<float> mask(H), s(H), xhat(H), g(H);
#pragma omp for schedule(static)
    for (int64_t block = 0; block < partial->blocks(); ++block) {
      for (int64_t r = block * kBlockRows; r < std::min(rows, (block + 1) * kBlockRows); ++r) {
        add_dropped(dropout, r, x + r * H, z + r * H, H, mask.data(), s.data());
        float* dxr = dx + r * H;
        normalize_row_backward(dy + r * H, s.data(), mean[r], rstd[r], gamma, H,
                               xhat.data(), g.data(), partial->of(block),
                               partial->of(block) + H, dxr);
        T* dzr = dz + r * H;
        for (int64_t j = 0; j < H; ++j)
          dzr[j] = from_float<T>(dropout.active() ? dxr[j] * mask[j] : dxr[j]);
      }
    }
  }
}

}  // namespace

// inputs: x, gamma, beta; outputs: y, mean, rstd
MXReturnValue layer_norm_forward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                                 std::vector<MXTensor>* outputs, const OpResource& res) {
  const float* x = (*inputs)[0].data<float>();
  const float* gamma = (*inputs)[1].data<float>();
  const float* beta = (*inputs)[2].data<float>();
  float* y = (*outputs)[0].data<float>();
  float* mean = (*outputs)[1].data<float>();
  float* rstd = (*outputs)[2].data<float>();
  const int64_t H = (*inputs)[0].shape.back(), rows = rows_of((*inputs)[0]);
  const float eps = float_attribute(attrs, "eps", 1e-5f);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    normalize_row(x + r * H, gamma, beta, H, eps, y + r * H, mean + r, rstd + r);
  return MX_SUCCESS;
}

// inputs: dy, dmean, drstd (unused: mean and rstd are not visible to the model),
//         x, gamma, beta, y, mean, rstd; outputs: dx, dgamma, dbeta
MXReturnValue layer_norm_backward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                                  std::vector<MXTensor>* outputs, const OpResource& res) {
  const float* dy = (*inputs)[0].data<float>();
  const float* x = (*inputs)[3].data<float>();
  const float* gamma = (*inputs)[4].data<float>();
  const float* mean = (*inputs)[7].data<float>();
  const float* rstd = (*inputs)[8].data<float>();
  float* dx = (*outputs)[0].data<float>();
  const int64_t H = (*inputs)[3].shape.back(), rows = rows_of((*inputs)[3]);
  BlockSums partial(2 * H, rows);
#pragma omp parallel
  {
    std::vector<float> xhat(H), g(H);
#pragma omp for schedule(static)
    for (int64_t block = 0; block < partial.blocks(); ++block) {
      for (int64_t r = block * kBlockRows; r < std::min(rows, (block + 1) * kBlockRows); ++r)
        normalize_row_backward(dy + r * H, x + r * H, mean[r], rstd[r], gamma, H,
                               xhat.data(), g.data(), partial.of(block),
                               partial.of(block) + H, dx + r * H);
    }
  }
  write_parameter_gradients(partial, H, (*outputs)[1].data<float>(),
                            (*outputs)[2].data<float>());
  return MX_SUCCESS;
}

// inputs: x, z, gamma, beta, training; outputs: y, mean, rstd, seed
MXReturnValue add_layer_norm_forward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                                     std::vector<MXTensor>* outputs, const OpResource& res) {
  const float* x = (*inputs)[0].data<float>();
  const float* gamma = (*inputs)[2].data<float>();
  const float* beta = (*inputs)[3].data<float>();
  Dropout dropout = dropout_of(attrs, (*inputs)[4]);
  draw_seed(res, &dropout, &(*outputs)[3]);
  float* y = (*outputs)[0].data<float>();
  float* mean = (*outputs)[1].data<float>();
  float* rstd = (*outputs)[2].data<float>();
  const int64_t H = (*inputs)[0].shape.back(), rows = rows_of((*inputs)[0]);
  const float eps = float_attribute(attrs, "eps", 1e-5f);
  const void* z = (*inputs)[1].data_ptr;
  if ((*inputs)[1].dtype == kBfloat16)
    add_layer_norm_rows(dropout, x, static_cast<const Bfloat16*>(z), gamma, beta, H, rows,
                        eps, y, mean, rstd);
  else
    add_layer_norm_rows(dropout, x, static_cast<const float*>(z), gamma, beta, H, rows, eps,
                        y, mean, rstd);
  return MX_SUCCESS;
}

// inputs: dy, dmean, drstd, dseed (unused), x, z, gamma, beta, training, y, mean, rstd,
//         seed; outputs: dx, dz, dgamma, dbeta, dtraining (0: not differentiable)
MXReturnValue add_layer_norm_backward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                                      std::vector<MXTensor>* outputs, const OpResource& res) {
  const float* dy = (*inputs)[0].data<float>();
  const float* x = (*inputs)[4].data<float>();
  const float* gamma = (*inputs)[6].data<float>();
  const float* mean = (*inputs)[10].data<float>();
  const float* rstd = (*inputs)[11].data<float>();
  const Dropout dropout = saved_dropout(attrs, (*inputs)[8], (*inputs)[12]);
  float* dx = (*outputs)[0].data<float>();
  (*outputs)[4].data<float>()[0] = 0.f;
  const int64_t H = (*inputs)[4].shape.back(), rows = rows_of((*inputs)[4]);
  BlockSums partial(2 * H, rows);
  const void* z = (*inputs)[5].data_ptr;
  void* dz = (*outputs)[1].data_ptr;
  if ((*inputs)[5].dtype == kBfloat16)
    add_layer_norm_rows_backward(dropout, dy, x, static_cast<const Bfloat16*>(z), gamma,
                                 mean, rstd, H, rows, dx, static_cast<Bfloat16*>(dz),
                                 &partial);
  else
    add_layer_norm_rows_backward(dropout, dy, x, static_cast<const float*>(z), gamma, mean,
                                 rstd, H, rows, dx, static_cast<float*>(dz), &partial);
  write_parameter_gradients(partial, H, (*outputs)[2].data<float>(),
                            (*outputs)[3].data<float>());
  return MX_SUCCESS;
}

MXReturnValue layer_norm_infer_type(const Attributes& attrs, std::vector<int>* in_types,
                                    std::vector<int>* out_types) {
  if (check_types("d2lbert_layer_norm", *in_types) != MX_SUCCESS) return MX_FAIL;
  for (int& type : *out_types) type = kFloat32;
  return MX_SUCCESS;
}

MXReturnValue add_layer_norm_infer_type(const Attributes& attrs, std::vector<int>* in_types,
                                        std::vector<int>* out_types) {
  // z may be bfloat16 (its gradient is then bfloat16 too)
  std::vector<int> as_float32 = *in_types;
  if (as_float32[1] == kBfloat16) as_float32[1] = kFloat32;
  if (check_types("d2lbert_add_layer_norm", as_float32) != MX_SUCCESS) return MX_FAIL;
  (*out_types) = {kFloat32, kFloat32, kFloat32, kInt32};
  return MX_SUCCESS;
}

// x: (..., H), the shapes of the inputs after it given by `same` (x's shape) and
// `vectors` ((H,)) and `scalars` ((1,)); y like x, mean and rstd (rows,)
static MXReturnValue infer_layer_norm_shapes(const char* op, int same, int vectors,
                                             int scalars,
                                             std::vector<std::vector<unsigned int>>* in,
                                             std::vector<std::vector<unsigned int>>* out) {
  const std::vector<unsigned int>& x = (*in)[0];
  bool ok = !x.empty();
  for (int i = 1; ok && i < 1 + same; ++i) ok = (*in)[i] == x;
  for (int i = 1 + same; ok && i < 1 + same + vectors; ++i)
    ok = (*in)[i] == std::vector<unsigned int>{x.back()};
  for (int i = 1 + same + vectors; ok && i < 1 + same + vectors + scalars; ++i)
    ok = (*in)[i] == std::vector<unsigned int>{1};
  if (!ok) {
    MX_ERROR_MSG << op << ": gamma and beta must have shape (H,), H = the last axis of x"
                 << (same ? ", and z the shape of x" : "");
    return MX_FAIL;
  }
  unsigned int rows = 1;
  for (size_t i = 0; i + 1 < x.size(); ++i) rows *= x[i];
  (*out)[0] = x;
  (*out)[1] = {rows};
  (*out)[2] = {rows};
  return MX_SUCCESS;
}

MXReturnValue layer_norm_infer_shape(const Attributes& attrs,
                                     std::vector<std::vector<unsigned int>>* in_shapes,
                                     std::vector<std::vector<unsigned int>>* out_shapes) {
  return infer_layer_norm_shapes("d2lbert_layer_norm", 0, 2, 0, in_shapes, out_shapes);
}

MXReturnValue add_layer_norm_infer_shape(const Attributes& attrs,
                                         std::vector<std::vector<unsigned int>>* in_shapes,
                                         std::vector<std::vector<unsigned int>>* out_shapes) {
  if (infer_layer_norm_shapes("d2lbert_add_layer_norm", 1, 2, 1, in_shapes, out_shapes) !=
      MX_SUCCESS)
    return MX_FAIL;
  (*out_shapes)[3] = {2};
  return MX_SUCCESS;
}

REGISTER_OP(d2lbert_layer_norm)
.setForward(layer_norm_forward, "cpu")
.setBackward(layer_norm_backward, "cpu")
.setParseAttrs(fixed_arity<3, 3>)
.setInferType(layer_norm_infer_type)
.setInferShape(layer_norm_infer_shape);

REGISTER_OP(d2lbert_add_layer_norm)
.setForward(add_layer_norm_forward, "cpu")
.setBackward(add_layer_norm_backward, "cpu")
.setParseAttrs(fixed_arity<5, 4>)
.setInferType(add_layer_norm_infer_type)
.setInferShape(add_layer_norm_infer_shape);
