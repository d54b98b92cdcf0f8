// BERT's input embedding: the token embeddings plus the segment and position
// embeddings, then dropout, forward and backward, as one MXNet extension operator.
//
//   d2lbert_embedding(token_vectors, segments, positions, segment_table,
//                     position_table, training, dropout) -> (x, seed)
//     token_vectors: (..., H), the token embeddings (looked up by MXNet's Embedding,
//       whose backward adds into the large token table's gradient as MXNet asks)
//     segments, positions: (...) int32 ids (clipped into each table's rows, as MXNet's
//       Embedding does); segment_table, position_table: (rows of the table, H)
//     x: (..., H) = dropout(token_vectors + segment_table[segments]
//                           + position_table[positions])
//     seed: (2,) int32, the dropout mask's seed (common.h), kept for backward
//
// Backward: d token_vectors = dx * mask; each table's gradient is the sum of
// dx * mask over the rows that looked it up. The tables' columns are split among the
// threads, so every gradient entry is added up by one thread in row order: no races
// and the same result every time. MXNet runs two more Embedding operators, two
// additions and a Dropout forward, and as many backward, each a pass over the
// (..., H) activations.
#include <omp.h>

#include "common.h"

using namespace d2lbert;

namespace {

struct Lookup {
  const int32_t* ids;
  int64_t rows;  // of the table
  int64_t row(int64_t i) const {
    return std::min<int64_t>(std::max<int64_t>(ids[i], 0), rows - 1);
  }
};

// Which columns [first, last) of H thread t of T adds up (multiples of 16 floats)
void column_range(int64_t H, int t, int T, int64_t* first, int64_t* last) {
  const int64_t chunks = (H + 15) / 16;
  *first = std::min(H, chunks * t / T * 16);
  *last = std::min(H, chunks * (t + 1) / T * 16);
}

}  // namespace

// inputs: token_vectors, segments, positions, segment_table, position_table, training;
// outputs: x, seed
MXReturnValue embedding_forward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                                std::vector<MXTensor>* outputs, const OpResource& res) {
  Dropout dropout = dropout_of(attrs, (*inputs)[5]);
  draw_seed(res, &dropout, &(*outputs)[1]);
  const int64_t n = (*inputs)[1].size(), H = (*inputs)[3].shape[1];
  const float* vectors = (*inputs)[0].data<float>();
  const Lookup segment{(*inputs)[1].data<int32_t>(), (*inputs)[3].shape[0]};
  const Lookup position{(*inputs)[2].data<int32_t>(), (*inputs)[4].shape[0]};
  const float* segment_table = (*inputs)[3].data<float>();
  const float* position_table = (*inputs)[4].data<float>();
  float* x = (*outputs)[0].data<float>();
#pragma omp parallel
  {
    std::vector<float> mask(H, 1.f);
#pragma omp for schedule(static)
    for (int64_t r = 0; r < n; ++r) {
      const float* a = vectors + r * H;
      const float* b = segment_table + segment.row(r) * H;
      const float* c = position_table + position.row(r) * H;
      if (dropout.active()) dropout.row_mask(r, static_cast<int>(H), mask.data());
      float* xr = x + r * H;
      for (int64_t j = 0; j < H; ++j) xr[j] = (a[j] + b[j] + c[j]) * mask[j];
    }
  }
  return MX_SUCCESS;
}

// inputs: dx, dseed (unused), token_vectors, segments, positions, segment_table,
//         position_table, training, x, seed; outputs: dtoken_vectors, dsegments,
//         dpositions (0), dsegment_table, dposition_table, dtraining (0)
MXReturnValue embedding_backward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                                 std::vector<MXTensor>* outputs, const OpResource& res) {
  const float* dx = (*inputs)[0].data<float>();
  const Dropout dropout = saved_dropout(attrs, (*inputs)[7], (*inputs)[9]);
  const int64_t n = (*inputs)[3].size(), H = (*inputs)[5].shape[1];
  float* dvectors = (*outputs)[0].data<float>();
  for (int i = 1; i < 3; ++i)
    std::fill_n((*outputs)[i].data<int32_t>(), (*outputs)[i].size(), 0);
  (*outputs)[5].data<float>()[0] = 0.f;
  const Lookup lookups[2] = {{(*inputs)[3].data<int32_t>(), (*inputs)[5].shape[0]},
                             {(*inputs)[4].data<int32_t>(), (*inputs)[6].shape[0]}};
  float* grads[2] = {(*outputs)[3].data<float>(), (*outputs)[4].data<float>()};
#pragma omp parallel
  {
    int64_t first, last;
    column_range(H, omp_get_thread_num(), omp_get_num_threads(), &first, &last);
    std::vector<float> mask(H, 1.f);
    for (int i = 0; i < 2; ++i)
      for (int64_t row = 0; row < lookups[i].rows; ++row)
        std::fill(grads[i] + row * H + first, grads[i] + row * H + last, 0.f);
    for (int64_t r = 0; r < n; ++r) {
      if (dropout.active()) dropout.mask_columns(r, first, last, mask.data());
      const float* dxr = dx + r * H;
      float* dvr = dvectors + r * H;
      for (int64_t j = first; j < last; ++j) dvr[j] = dxr[j] * mask[j];
      for (int i = 0; i < 2; ++i) {
        float* g = grads[i] + lookups[i].row(r) * H;
        for (int64_t j = first; j < last; ++j) g[j] += dvr[j];
      }
    }
  }
  return MX_SUCCESS;
}

MXReturnValue embedding_infer_type(const Attributes& attrs, std::vector<int>* in_types,
                                   std::vector<int>* out_types) {
  if (check_types("d2lbert_embedding", *in_types, {1, 2}) != MX_SUCCESS) return MX_FAIL;
  (*out_types) = {kFloat32, kInt32};
  return MX_SUCCESS;
}

MXReturnValue embedding_infer_shape(const Attributes& attrs,
                                    std::vector<std::vector<unsigned int>>* in_shapes,
                                    std::vector<std::vector<unsigned int>>* out_shapes) {
  const std::vector<unsigned int>& vectors = (*in_shapes)[0];
  const std::vector<unsigned int>& ids = (*in_shapes)[1];
  bool ok = !vectors.empty() && (*in_shapes)[2] == ids &&
            (*in_shapes)[5] == std::vector<unsigned int>{1} &&
            std::vector<unsigned int>(vectors.begin(), vectors.end() - 1) == ids;
  for (int i = 3; ok && i < 5; ++i)
    ok = (*in_shapes)[i].size() == 2 && (*in_shapes)[i][1] == vectors.back();
  if (!ok) {
    MX_ERROR_MSG << "d2lbert_embedding: token_vectors must be (..., H), segments and "
                    "positions (...), the tables (rows, H), training (1,)";
    return MX_FAIL;
  }
  (*out_shapes)[0] = vectors;
  (*out_shapes)[1] = {2};
  return MX_SUCCESS;
}

REGISTER_OP(d2lbert_embedding)
.setForward(embedding_forward, "cpu")
.setBackward(embedding_backward, "cpu")
.setParseAttrs(fixed_arity<6, 2>)
.setInferType(embedding_infer_type)
.setInferShape(embedding_infer_shape);
