// The optimizer's step as two MXNet extension operators: the global gradient norm,
// and clipping + Adam + zeroing the gradient in one pass over each parameter.
//
//   d2lbert_sum_squares(a_1, ..., a_n, num_arrays=n) -> (1,): sum of every a_i's squares
//   d2lbert_adam_update(weight, grad, mean, var, scale, rescale, lr, wd, beta1, beta2,
//                       epsilon, decoupled) -> (1,): scale * rescale; updates weight, mean
//                       and var in place and sets grad to 0:
//     g = scale * rescale * grad (+ wd * weight unless decoupled)
//     mean = beta1 * mean + (1 - beta1) * g;  var = beta2 * var + (1 - beta2) * g^2
//     weight -= lr * (mean / (sqrt(var) + epsilon) (+ wd * weight if decoupled))
//   decoupled=0 is MXNet's adam_update (bias correction is in lr, as MXNet's Adam
//   passes it); decoupled=1 is GluonNLP's BERTAdam (adamw_update with eta = lr).
//   scale: (1,) array, the clipping factor; rescale: a number (the optimizer's
//   rescale_grad, 1 / the loss scale).
//
// The step of an optimizer is bound by memory traffic. MXNet runs it as five passes
// over every gradient (its square and sum, the clipping product, the update reading
// the gradient again, zeroing it): on a 30522 x 256 token embedding about 150 ms a
// step on a Zen 1, against one read for the norm and one read-and-write pass here.
// The squares are summed in blocks of kBlock values, each in double, then added in
// block order: the result does not depend on the number of threads.
#include <omp.h>

#include "common.h"

using namespace d2lbert;

namespace {

constexpr int64_t kBlock = 1 << 16;

double sum_of_squares(const float* x, int64_t n) {
  const int64_t blocks = (n + kBlock - 1) / kBlock;
  std::vector<double> partial(blocks, 0.0);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * kBlock, end = std::min(n, begin + kBlock);
    float lanes[16] = {0.f};  // 16 float accumulators over at most 4096 values each
    double block_sum = 0.0;
    for (int64_t chunk = begin; chunk < end; chunk += 4096) {
      const int64_t chunk_end = std::min(end, chunk + 4096);
      int64_t i = chunk;
      for (; i + 16 <= chunk_end; i += 16) {
#pragma omp simd
        for (int k = 0; k < 16; ++k) lanes[k] += x[i + k] * x[i + k];
      }
      for (; i < chunk_end; ++i) block_sum += static_cast<double>(x[i]) * x[i];
      for (int k = 0; k < 16; ++k) {
        block_sum += lanes[k];
        lanes[k] = 0.f;
      }
    }
    partial[b] = block_sum;
  }
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

struct AdamSettings {
  float lr, wd, beta1, beta2, epsilon;
  bool decoupled;
};

AdamSettings adam_settings(const Attributes& attrs) {
  return {float_attribute(attrs, "lr", 1e-3f), float_attribute(attrs, "wd", 0.f),
          float_attribute(attrs, "beta1", 0.9f), float_attribute(attrs, "beta2", 0.999f),
          float_attribute(attrs, "epsilon", 1e-8f), int_attribute(attrs, "decoupled", 0) != 0};
}

// Whether grad, mean and var are all zero on [begin, end).
bool all_zero(const float* grad, const float* mean, const float* var, int64_t begin,
              int64_t end) {
  bool zero = true;
#pragma omp simd reduction(&& : zero)
  for (int64_t i = begin; i < end; ++i)
    zero = zero && grad[i] == 0.f && mean[i] == 0.f && var[i] == 0.f;
  return zero;
}

// In chunks of kChunk values. A chunk whose gradient and moments are all zero (the
// rows of an embedding's words that no batch held yet: most of a vocabulary when
// fine-tuning) keeps its moments at zero, so only its weight is written, as the full
// update would write it (m / (sqrt(v) + epsilon) is +0 there): the moments and the
// gradient are read, not written back, which halves the memory traffic of such rows.
// Without decoupled weight decay (Adam's wd enters the gradient) no chunk skips.
constexpr int64_t kChunk = 64;

void adam_update(const AdamSettings& s, float scale, int64_t n, float* weight, float* grad,
                 float* mean, float* var) {
  const float coupled_wd = s.decoupled ? 0.f : s.wd, decoupled_wd = s.decoupled ? s.wd : 0.f;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    const int64_t begin = chunk * kChunk, end = std::min(n, begin + kChunk);
    if (coupled_wd == 0.f && all_zero(grad, mean, var, begin, end)) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i)
        weight[i] -= s.lr * (0.f + decoupled_wd * weight[i]);
      continue;
    }
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) {
      const float g = scale * grad[i] + coupled_wd * weight[i];
      const float m = s.beta1 * mean[i] + (1.f - s.beta1) * g;
      const float v = s.beta2 * var[i] + (1.f - s.beta2) * g * g;
      mean[i] = m;
      var[i] = v;
      weight[i] -= s.lr * (m / (std::sqrt(v) + s.epsilon) + decoupled_wd * weight[i]);
      grad[i] = 0.f;
    }
  }
}

}  // namespace

MXReturnValue sum_squares_forward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                                  std::vector<MXTensor>* outputs, const OpResource& res) {
  double total = 0.0;
  for (MXTensor& x : *inputs) total += sum_of_squares(x.data<float>(), x.size());
  (*outputs)[0].data<float>()[0] = static_cast<float>(total);
  return MX_SUCCESS;
}

MXReturnValue sum_squares_arity(const Attributes& attrs, int* num_inputs, int* num_outputs) {
  *num_inputs = int_attribute(attrs, "num_arrays", 1);
  *num_outputs = 1;
  return MX_SUCCESS;
}

MXReturnValue sum_squares_infer_type(const Attributes& attrs, std::vector<int>* in_types,
                                     std::vector<int>* out_types) {
  if (check_types("d2lbert_sum_squares", *in_types) != MX_SUCCESS) return MX_FAIL;
  (*out_types) = {kFloat32};
  return MX_SUCCESS;
}

MXReturnValue scalar_output(const Attributes& attrs,
                            std::vector<std::vector<unsigned int>>* in_shapes,
                            std::vector<std::vector<unsigned int>>* out_shapes) {
  (*out_shapes)[0] = {1};
  return MX_SUCCESS;
}

REGISTER_OP(d2lbert_sum_squares)
.setForward(sum_squares_forward, "cpu")
.setParseAttrs(sum_squares_arity)
.setInferType(sum_squares_infer_type)
.setInferShape(scalar_output);

// inputs: weight, grad, mean, var (updated in place), scale (1,); output: scale
MXReturnValue adam_update_forward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                                  std::vector<MXTensor>* outputs, const OpResource& res) {
  std::vector<MXTensor>& in = *inputs;
  const float scale = in[4].data<float>()[0] * float_attribute(attrs, "rescale", 1.f);
  adam_update(adam_settings(attrs), scale, in[0].size(), in[0].data<float>(),
              in[1].data<float>(), in[2].data<float>(), in[3].data<float>());
  (*outputs)[0].data<float>()[0] = scale;
  return MX_SUCCESS;
}

MXReturnValue adam_update_mutates(const Attributes& attrs, std::vector<int>* input_indices) {
  *input_indices = {0, 1, 2, 3};
  return MX_SUCCESS;
}

MXReturnValue adam_update_infer_type(const Attributes& attrs, std::vector<int>* in_types,
                                     std::vector<int>* out_types) {
  if (check_types("d2lbert_adam_update", *in_types) != MX_SUCCESS) return MX_FAIL;
  (*out_types) = {kFloat32};
  return MX_SUCCESS;
}

MXReturnValue adam_update_infer_shape(const Attributes& attrs,
                                      std::vector<std::vector<unsigned int>>* in_shapes,
                                      std::vector<std::vector<unsigned int>>* out_shapes) {
  const auto& shapes = *in_shapes;
  if (shapes[1] != shapes[0] || shapes[2] != shapes[0] || shapes[3] != shapes[0] ||
      shapes[4] != std::vector<unsigned int>{1}) {
    MX_ERROR_MSG << "d2lbert_adam_update: grad, mean and var must have the weight's shape, "
                    "scale the shape (1,)";
    return MX_FAIL;
  }
  (*out_shapes)[0] = {1};
  return MX_SUCCESS;
}

REGISTER_OP(d2lbert_adam_update)
.setForward(adam_update_forward, "cpu")
.setParseAttrs(fixed_arity<5, 1>)
.setMutateInputs(adam_update_mutates)
.setInferType(adam_update_infer_type)
.setInferShape(adam_update_infer_shape);
