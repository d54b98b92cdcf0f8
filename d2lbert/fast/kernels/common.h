// What d2lbert's kernels share: attributes, a vectorizable exp and dropout masks.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "mxnet/lib_api.h"

namespace d2lbert {

using namespace mxnet::ext;  // MXTensor, OpResource, MXReturnValue, MX_SUCCESS, ...
using Attributes = std::unordered_map<std::string, std::string>;

inline float float_attribute(const Attributes& attrs, const char* name, float fallback) {
  auto it = attrs.find(name);
  return it == attrs.end() ? fallback : std::stof(it->second);
}

inline int int_attribute(const Attributes& attrs, const char* name, int fallback) {
  auto it = attrs.find(name);
  return it == attrs.end() ? fallback : std::stoi(it->second);
}

// A comma-separated list of numbers ("0.1,0.2"); empty if the attribute is missing.
inline std::vector<float> float_list_attribute(const Attributes& attrs, const char* name) {
  std::vector<float> values;
  auto it = attrs.find(name);
  if (it == attrs.end()) return values;
  size_t start = 0;
  while (start <= it->second.size()) {
    const size_t comma = std::min(it->second.find(',', start), it->second.size());
    values.push_back(std::stof(it->second.substr(start, comma - start)));
    start = comma + 1;
  }
  return values;
}

// An operator's parse_attrs: it always has `Inputs` inputs and `Outputs` outputs.
template <int Inputs, int Outputs>
MXReturnValue fixed_arity(const Attributes& attrs, int* num_inputs, int* num_outputs) {
  *num_inputs = Inputs;
  *num_outputs = Outputs;
  return MX_SUCCESS;
}

// bfloat16, which MXNet 1.9's extension API does not name: mshadow's type flag 12,
// the upper 16 bits of a float32. Kernels read and write its raw bits.
constexpr int kBfloat16 = 12;
struct Bfloat16 {
  uint16_t bits;
};

inline float to_float(float x) { return x; }
inline float to_float(Bfloat16 x) {
  uint32_t word = static_cast<uint32_t>(x.bits) << 16;
  float value;
  std::memcpy(&value, &word, sizeof value);
  return value;
}

template <typename T> T from_float(float x);
template <> inline float from_float<float>(float x) { return x; }
// Rounded to the nearest bfloat16, ties to even, as oneDNN's casts (x finite).
template <> inline Bfloat16 from_float<Bfloat16>(float x) {
  uint32_t word;
  std::memcpy(&word, &x, sizeof word);
  word += 0x7FFFu + ((word >> 16) & 1u);
  return Bfloat16{static_cast<uint16_t>(word >> 16)};
}

// Every input must be float32, except those listed in `int_inputs` (int32).
inline MXReturnValue check_types(const char* op, const std::vector<int>& types,
                                 const std::vector<size_t>& int_inputs = {}) {
  for (size_t i = 0; i < types.size(); ++i) {
    bool is_int = std::find(int_inputs.begin(), int_inputs.end(), i) != int_inputs.end();
    if (types[i] != (is_int ? kInt32 : kFloat32)) {
      MX_ERROR_MSG << op << ": input " << i << " must be " << (is_int ? "int32" : "float32");
      return MX_FAIL;
    }
  }
  return MX_SUCCESS;
}

// A parameter's gradient summed over many rows (LayerNorm's gamma and beta, the
// masked-LM bias) is summed in blocks of kBlockRows rows: the blocks' partial sums in
// parallel, then the partial sums in block order. The result depends neither on the
// number of threads nor on how many all-zero-gradient rows follow the others (packed
// batches of different sizes give equal gradients).
constexpr int64_t kBlockRows = 64;

// Such sums, `width` numbers summed over `rows` rows: block b's partial sums (float,
// at of(b)) are filled in parallel, then added, block after block, in double. A block's
// own sums in float keep a row loop's products in float vectors (adding each row in
// double cost LayerNorm's backward 7% of its time held to AVX2).
class BlockSums {
 public:
  BlockSums(int64_t width, int64_t rows)
      : width_(width), blocks_((rows + kBlockRows - 1) / kBlockRows),
        partial_(width * blocks_, 0.f) {}
  int64_t blocks() const { return blocks_; }
  float* of(int64_t block) { return partial_.data() + width_ * block; }
  // out[j] = the sum over blocks of of(block)[first + j], for j in [0, n)
  void write(int64_t first, int64_t n, float* out) const {
    for (int64_t j = first; j < first + n; ++j) {
      double sum = 0.0;
      for (int64_t block = 0; block < blocks_; ++block) sum += partial_[width_ * block + j];
      out[j - first] = static_cast<float>(sum);
    }
  }

 private:
  int64_t width_, blocks_;
  std::vector<float> partial_;
};

// exp(x) for x <= 0 (softmax after subtracting the maximum): 2^n * p(r) with
// x = n ln2 + r, |r| <= ln2 / 2, and p(r) = 1 + r + r^2 q(r), q of degree 3 fitted to
// exp's relative error on that interval: at most 1.8e-7 for x in [-87, 0], 3 float
// ulps (Cephes' expf uses a degree 7 p for 1 ulp, two more multiply-adds per element,
// 20% more time in the masked-LM loss). Unlike std::exp, the compiler turns a loop of
// it into vector instructions. n is rounded by adding 1.5 * 2^23 (the float sum keeps
// no fraction), which also leaves n in the sum's low bits (std::floor or an int
// conversion would keep loops scalar).
inline float exp_nonpositive(float x) {
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23, bits 0x4B400000
  x = x > -87.0f ? x : -87.0f;
  const float shifted = x * 1.44269504f + kRound;
  const float n = shifted - kRound;  // round(x / ln2)
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float q = 8.312525227665901e-3f;
  q = q * r + 4.1890114545822144e-2f;
  q = q * r + 1.6667114198207855e-1f;
  q = q * r + 4.99992311000824e-1f;
  const float p = q * r * r + r + 1.0f;
  const int32_t two_to_n = (__builtin_bit_cast(int32_t, shifted) - 0x4B400000 + 127) << 23;
  return p * __builtin_bit_cast(float, two_to_n);
}

// Dropout without a random-number stream: element (row, column) is kept iff a hash of
// (seed, row, column) is at least p * 2^32. Any thread can compute any part of the
// mask, in any order, and the backward pass recomputes it from the seed instead of
// storing it. The hash is "lowbias32" (Chris Wellons), a 32-bit integer mixer.
inline uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

struct Dropout {
  float rate = 0.f;        // p, the probability of dropping an element
  uint32_t threshold = 0;  // p * 2^32
  uint32_t seed[2] = {0, 0};

  bool active() const { return rate > 0.f; }
  float keep_scale() const { return 1.f / (1.f - rate); }

  uint32_t row_key(int64_t row) const {
    return mix32(mix32(static_cast<uint32_t>(row) ^ seed[0]) +
                 (static_cast<uint32_t>(static_cast<uint64_t>(row) >> 32) ^ seed[1]));
  }
  // whether column j of the row whose row_key is `key` is kept
  bool keeps(uint32_t key, int64_t j) const {
    return mix32(key + static_cast<uint32_t>(j) * 0x9e3779b9u) >= threshold;
  }
  // mask[j] = 1 / (1 - p) or 0 for columns j in [first, last) of `row`
  void mask_columns(int64_t row, int64_t first, int64_t last, float* mask) const {
    const uint32_t key = row_key(row);
    const float scale = keep_scale();
    for (int64_t j = first; j < last; ++j) mask[j] = keeps(key, j) ? scale : 0.f;
  }
  // the first n columns
  void row_mask(int64_t row, int n, float* mask) const { mask_columns(row, 0, n, mask); }
};

// The dropout of an op: attribute "dropout" (p) and the training flag. MXNet does not
// tell extension operators whether it is training, so the blocks pass `training`, a
// one-element tensor that MXNet's own Dropout made from a 1: it stays 1 outside
// training and becomes 0 or 2 in training (see d2lbert/kernels/__init__.py).
inline Dropout dropout_of(const Attributes& attrs, MXTensor& training) {
  Dropout dropout;
  const float rate = float_attribute(attrs, "dropout", 0.f);
  if (rate > 0.f && training.data<float>()[0] != 1.f) {
    dropout.rate = rate;
    dropout.threshold = static_cast<uint32_t>(std::min(rate * 4294967296.0, 4294967295.0));
  }
  return dropout;
}

// A fresh seed from MXNet's CPU random state (seeded by mx.random.seed), stored in the
// op's int32 output `seed` (2,) so that the backward pass can rebuild the mask.
inline void draw_seed(const OpResource& res, Dropout* dropout, MXTensor* seed_output) {
  int32_t* out = seed_output->data<int32_t>();
  if (dropout->active()) {
    mx_cpu_rand_t& rng = res.get_cpu_rand_states()[0];
    dropout->seed[0] = static_cast<uint32_t>(rng());
    dropout->seed[1] = static_cast<uint32_t>(rng());
  }
  std::memcpy(out, dropout->seed, sizeof dropout->seed);
}

// The dropout the forward pass used: its rate from the attributes, active iff its
// training flag was, the seed it stored.
inline Dropout saved_dropout(const Attributes& attrs, MXTensor& training,
                             MXTensor& seed) {
  Dropout dropout = dropout_of(attrs, training);
  std::memcpy(dropout.seed, seed.data<int32_t>(), sizeof dropout.seed);
  return dropout;
}

}  // namespace d2lbert
