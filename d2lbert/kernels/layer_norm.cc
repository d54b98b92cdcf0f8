// LayerNorm over the last axis, forward and backward, as one MXNet extension operator.
//
// MXNet 1.9's own CPU LayerNorm backward is a chain of generic reductions (about 1 ns
// per element for the gamma/beta sums alone); here each row is read once or twice
// while it is in cache, and the gamma/beta sums are per-thread partial sums.
//
//   d2lbert_layer_norm(x, gamma, beta, eps) -> (y, mean, rstd)
//     x, y: (..., H); gamma, beta: (H,); mean, rstd: (rows,), rows = x.size / H
//     y = (x - mean) * rstd * gamma + beta,   rstd = 1 / sqrt(var + eps)
//
// Backward, with xhat = (x - mean) * rstd and g = dy * gamma (per row, means over H):
//     dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//     dgamma = sum over rows of dy * xhat,  dbeta = sum over rows of dy
//
// MXNet hands an extension operator no write request (write or add), so the outputs
// are always overwritten; d2lbert's LayerNorm block routes the inputs through
// `identity` so that MXNet adds into gradient buffers where it should.
#include <omp.h>

#include <cmath>
#include <string>
#include <unordered_map>
#include <vector>

#include "mxnet/lib_api.h"

using namespace mxnet::ext;  // MXTensor, OpResource, MXReturnValue, MX_SUCCESS, ...
using Attributes = std::unordered_map<std::string, std::string>;

static float epsilon_of(const Attributes& attrs) {
  auto it = attrs.find("eps");
  return it == attrs.end() ? 1e-5f : std::stof(it->second);
}

// inputs: x, gamma, beta; outputs: y, mean, rstd
MXReturnValue layer_norm_forward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                                 std::vector<MXTensor>* outputs, const OpResource& res) {
  const float* x = (*inputs)[0].data<float>();
  const float* gamma = (*inputs)[1].data<float>();
  const float* beta = (*inputs)[2].data<float>();
  float* y = (*outputs)[0].data<float>();
  float* mean = (*outputs)[1].data<float>();
  float* rstd = (*outputs)[2].data<float>();
  const int64_t H = (*inputs)[0].shape.back();
  const int64_t rows = (*inputs)[0].size() / H;
  const float eps = epsilon_of(attrs);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * H;
    float* yr = y + r * H;
    float sum = 0.f;
    for (int64_t j = 0; j < H; ++j) sum += xr[j];
    const float m = sum / H;
    float squares = 0.f;
    for (int64_t j = 0; j < H; ++j) squares += (xr[j] - m) * (xr[j] - m);
    const float rs = 1.f / std::sqrt(squares / H + eps);
    for (int64_t j = 0; j < H; ++j) yr[j] = (xr[j] - m) * rs * gamma[j] + beta[j];
    mean[r] = m;
    rstd[r] = rs;
  }
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
  float* dgamma = (*outputs)[1].data<float>();
  float* dbeta = (*outputs)[2].data<float>();
  const int64_t H = (*inputs)[3].shape.back();
  const int64_t rows = (*inputs)[3].size() / H;
  const int threads = omp_get_max_threads();
  // per thread: H partial sums for dgamma, then H for dbeta (double: rows can be many)
  std::vector<double> partial(2 * H * threads, 0.0);
#pragma omp parallel num_threads(threads)
  {
    double* dgamma_part = partial.data() + 2 * H * omp_get_thread_num();
    double* dbeta_part = dgamma_part + H;
    std::vector<float> xhat(H), g(H);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * H;
      const float* dyr = dy + r * H;
      float mean_g = 0.f, mean_g_xhat = 0.f;
      for (int64_t j = 0; j < H; ++j) {
        xhat[j] = (xr[j] - mean[r]) * rstd[r];
        g[j] = dyr[j] * gamma[j];
        mean_g += g[j];
        mean_g_xhat += g[j] * xhat[j];
        dgamma_part[j] += dyr[j] * xhat[j];
        dbeta_part[j] += dyr[j];
      }
      mean_g /= H;
      mean_g_xhat /= H;
      float* dxr = dx + r * H;
      for (int64_t j = 0; j < H; ++j) dxr[j] = rstd[r] * (g[j] - mean_g - xhat[j] * mean_g_xhat);
    }
  }
  for (int64_t j = 0; j < H; ++j) {
    double dgamma_j = 0.0, dbeta_j = 0.0;
    for (int t = 0; t < threads; ++t) {
      dgamma_j += partial[2 * H * t + j];
      dbeta_j += partial[2 * H * t + H + j];
    }
    dgamma[j] = static_cast<float>(dgamma_j);
    dbeta[j] = static_cast<float>(dbeta_j);
  }
  return MX_SUCCESS;
}

MXReturnValue layer_norm_parse_attrs(const Attributes& attrs, int* num_inputs,
                                     int* num_outputs) {
  *num_inputs = 3;
  *num_outputs = 3;
  return MX_SUCCESS;
}

MXReturnValue layer_norm_infer_type(const Attributes& attrs, std::vector<int>* in_types,
                                    std::vector<int>* out_types) {
  for (int type : *in_types) {
    if (type != kFloat32) {
      MX_ERROR_MSG << "d2lbert_layer_norm supports float32 only";
      return MX_FAIL;
    }
  }
  for (int& type : *out_types) type = kFloat32;
  return MX_SUCCESS;
}

MXReturnValue layer_norm_infer_shape(const Attributes& attrs,
                                     std::vector<std::vector<unsigned int>>* in_shapes,
                                     std::vector<std::vector<unsigned int>>* out_shapes) {
  const std::vector<unsigned int>& x = (*in_shapes)[0];
  if (x.empty() || (*in_shapes)[1] != std::vector<unsigned int>{x.back()} ||
      (*in_shapes)[2] != std::vector<unsigned int>{x.back()}) {
    MX_ERROR_MSG << "d2lbert_layer_norm: gamma and beta must have shape (H,), "
                    "H = the last axis of x";
    return MX_FAIL;
  }
  unsigned int rows = 1;
  for (size_t i = 0; i + 1 < x.size(); ++i) rows *= x[i];
  (*out_shapes)[0] = x;
  (*out_shapes)[1] = {rows};
  (*out_shapes)[2] = {rows};
  return MX_SUCCESS;
}

REGISTER_OP(d2lbert_layer_norm)
.setForward(layer_norm_forward, "cpu")
.setBackward(layer_norm_backward, "cpu")
.setParseAttrs(layer_norm_parse_attrs)
.setInferType(layer_norm_infer_type)
.setInferShape(layer_norm_infer_shape);

MXReturnValue initialize(int version) { return MX_SUCCESS; }
