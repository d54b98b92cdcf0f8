// The optimizer's step as two MXNet extension operators: the global gradient norm,
// and clipping + Adam + zeroing the gradient in one pass over every parameter.
//
//   d2lbert_sum_squares(a_1, ..., a_n, num_arrays=n) -> (1,): sum of every a_i's squares
//   d2lbert_adam_update(weight_1, grad_1, mean_1, var_1, ..., weight_n, grad_n, mean_n,
//                       var_n, scale, num_params=n, lr, wd, rescale, beta1, beta2,
//                       epsilon, decoupled) -> (1,): scale * rescale; updates each
//                       weight, mean and var in place and sets each grad to 0:
//     g = scale * rescale * grad (+ wd * weight unless decoupled)
//     mean = beta1 * mean + (1 - beta1) * g;  var = beta2 * var + (1 - beta2) * g^2
//     weight -= lr * (mean / (sqrt(var) + epsilon) (+ wd * weight if decoupled))
//   lr and wd: n comma-separated numbers, parameter i's (its lr_mult and wd_mult
//   applied). decoupled=0 is MXNet's adam_update (bias correction is in lr, as MXNet's
//   Adam passes it); decoupled=1 is GluonNLP's BERTAdam (adamw_update with eta = lr).
//   scale: (1,) array, the clipping factor; rescale: a number (the optimizer's
//   rescale_grad, 1 / the loss scale).
//
// The step of an optimizer is bound by memory traffic. MXNet runs it as five passes
// over every gradient (its square and sum, the clipping product, the update reading
// the gradient again, zeroing it): on a 30522 x 256 token embedding about 150 ms a
// step on a Zen 1, against one read for the norm and one read-and-write pass here.
// All parameters are updated by one operator in one parallel loop: one call per
// parameter cost the training loop ~80 us of Python each (3 ms of a 35 ms fine-tuning
// step with 39 parameters), time the 2-core CPU's compute threads lost.
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
  float beta1, beta2, epsilon;
  bool decoupled;
};

AdamSettings adam_settings(const Attributes& attrs) {
  return {float_attribute(attrs, "beta1", 0.9f), float_attribute(attrs, "beta2", 0.999f),
          float_attribute(attrs, "epsilon", 1e-8f), int_attribute(attrs, "decoupled", 0) != 0};
}

// One parameter to update: its arrays (n values each), learning rate and weight decay.
struct Parameter {
  float *weight, *grad, *mean, *var;
  int64_t n;
  float lr, wd;
};

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

void update_chunk(const AdamSettings& s, float scale, const Parameter& p, int64_t begin) {
  const int64_t end = std::min(p.n, begin + kChunk);
  const float coupled_wd = s.decoupled ? 0.f : p.wd, decoupled_wd = s.decoupled ? p.wd : 0.f;
  float *weight = p.weight, *grad = p.grad, *mean = p.mean, *var = p.var;
  if (coupled_wd == 0.f && all_zero(grad, mean, var, begin, end)) {
#pragma omp simd
    for (int64_t i = begin; i < end; ++i) weight[i] -= p.lr * (0.f + decoupled_wd * weight[i]);
    return;
  }
#pragma omp simd
  for (int64_t i = begin; i < end; ++i) {
    const float g = scale * grad[i] + coupled_wd * weight[i];
    const float m = s.beta1 * mean[i] + (1.f - s.beta1) * g;
    const float v = s.beta2 * var[i] + (1.f - s.beta2) * g * g;
    mean[i] = m;
    var[i] = v;
    weight[i] -= p.lr * (m / (std::sqrt(v) + s.epsilon) + decoupled_wd * weight[i]);
    grad[i] = 0.f;
  }
}

// Every parameter's chunks, numbered one after another, shared out among the threads.
void adam_update(const AdamSettings& s, float scale, const std::vector<Parameter>& params) {
  std::vector<int64_t> first_chunk(params.size() + 1, 0);
  for (size_t i = 0; i < params.size(); ++i)
    first_chunk[i + 1] = first_chunk[i] + (params[i].n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t chunk = 0; chunk < first_chunk.back(); ++chunk) {
    const size_t i =
        std::upper_bound(first_chunk.begin(), first_chunk.end(), chunk) - first_chunk.begin() - 1;
    update_chunk(s, scale, params[i], (chunk - first_chunk[i]) * kChunk);
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

// inputs: (weight, grad, mean, var) for each of num_params parameters (updated in
// place), scale (1,); output: scale
MXReturnValue adam_update_forward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                                  std::vector<MXTensor>* outputs, const OpResource& res) {
  std::vector<MXTensor>& in = *inputs;
  const int64_t num_params = (in.size() - 1) / 4;
  const std::vector<float> lr = float_list_attribute(attrs, "lr"),
                           wd = float_list_attribute(attrs, "wd");
  if (static_cast<int64_t>(lr.size()) != num_params ||
      static_cast<int64_t>(wd.size()) != num_params) {
    MX_ERROR_MSG << "d2lbert_adam_update: lr and wd need " << num_params
                 << " numbers each, one per parameter";
    return MX_FAIL;
  }
  std::vector<Parameter> params;
  for (int64_t i = 0; i < num_params; ++i) {
    MXTensor* p = &in[4 * i];
    params.push_back({p[0].data<float>(), p[1].data<float>(), p[2].data<float>(),
                      p[3].data<float>(), p[0].size(), lr[i], wd[i]});
  }
  const float scale = in.back().data<float>()[0] * float_attribute(attrs, "rescale", 1.f);
  adam_update(adam_settings(attrs), scale, params);
  (*outputs)[0].data<float>()[0] = scale;
  return MX_SUCCESS;
}

MXReturnValue adam_update_arity(const Attributes& attrs, int* num_inputs, int* num_outputs) {
  *num_inputs = 4 * int_attribute(attrs, "num_params", 1) + 1;
  *num_outputs = 1;
  return MX_SUCCESS;
}

MXReturnValue adam_update_mutates(const Attributes& attrs, std::vector<int>* input_indices) {
  input_indices->clear();
  for (int i = 0; i < 4 * int_attribute(attrs, "num_params", 1); ++i)
    input_indices->push_back(i);
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
  for (size_t i = 0; i + 1 < shapes.size(); i += 4) {
    if (shapes[i + 1] != shapes[i] || shapes[i + 2] != shapes[i] ||
        shapes[i + 3] != shapes[i]) {
      MX_ERROR_MSG << "d2lbert_adam_update: parameter " << i / 4
                   << "'s grad, mean and var must have its weight's shape";
      return MX_FAIL;
    }
  }
  if (shapes.back() != std::vector<unsigned int>{1}) {
    MX_ERROR_MSG << "d2lbert_adam_update: scale must have the shape (1,)";
    return MX_FAIL;
  }
  (*out_shapes)[0] = {1};
  return MX_SUCCESS;
}

REGISTER_OP(d2lbert_adam_update)
.setForward(adam_update_forward, "cpu")
.setParseAttrs(adam_update_arity)
.setMutateInputs(adam_update_mutates)
.setInferType(adam_update_infer_type)
.setInferShape(adam_update_infer_shape);
