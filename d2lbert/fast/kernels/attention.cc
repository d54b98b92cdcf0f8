// Multi-head scaled dot-product self-attention with valid lengths and dropout, forward
// and backward, as one MXNet extension operator.
//
//   d2lbert_attention(qkv, valid_lens, training, heads, dropout) -> (context, lse, seed)
//     qkv: the projected queries, keys and values, interleaved per head: columns
//          [q_1 k_1 v_1 q_2 k_2 v_2 ...], each block d = H / heads wide; either
//          (B, S, 3H), example b in qkv[b] (padded), or
//          (T, 3H), the examples' valid tokens one after another (packed): example b
//          in the valid_lens[b] rows after those of examples 0..b-1, rows beyond
//          sum(valid_lens) unused
//     valid_lens: (B,) int32; example b attends to its first L_b keys only
//     training: (1,), see common.h (dropout of the attention weights while training)
//     context: qkv's shape with H columns, head j in columns [j d, (j + 1) d); 0 in
//          unused rows
//     lse: (heads, rows), each query's log of the softmax denominator (kept for backward)
//     seed: (2,) int32, the seed of the dropout mask (kept for backward)
//     first_query_only: 1: only each example's first query is attended (padded qkv):
//          its context row as above, the example's other rows 0 (and their lse); the
//          backward takes the first rows' dcontext only (a sentence classifier reads
//          position 0 alone: d2lbert.fast.first_token)
//
//   d2lbert_int8_attention(sums, row_scales, zero_points, column_scales, weight_sums,
//                          bias, valid_lens, heads, first_query_only) -> (context, lse)
//     the same without dropout (inference), qkv given as the int32 sums of an int8
//     product and d2lbert_dequantize's other inputs (int8_rows.h), each example's rows
//     scaled back to float32 in the thread's memory: the projection (the widest
//     output of the block's int8 products) never goes to memory in float32
//
// For every example b and head j, with s = 1 / sqrt(d):
//     P = softmax(s Q K[:L]^T)   (queries, L)   W = P * mask / (1 - p)   (dropout)
//     context = W V[:L]          (queries, d)
// Backward, from dC = d context, P recomputed as exp(s Q K[:L]^T - lse):
//     dW = dC V[:L]^T,  dV[:L] = W^T dC,  dP = dW * mask / (1 - p)
//     dZ = P * (dP - rowsum(dP * P))          (softmax backward)
//     dQ = s dZ K[:L],  dK[:L] = s dZ^T Q,    dK and dV are 0 beyond L
//
// MXNet 1.9 computes the same with its interleaved_matmul_selfatt_* operators, a
// masked softmax and a separate dropout (5 operators forward, 5 backward, and the
// padded keys included). Here each thread takes whole examples, one after another
// (an example's rows are contiguous in memory, and the next example's are prefetched
// a few cache lines after each tile of this one's products), does the small products
// with gemm.h's micro-kernel, and the softmax and dropout while the scores are in
// cache. Recomputing P (one more small product) instead of storing it saves memory,
// and the zero gradient MXNet would make for it. A head's scores are stored in rows
// padded to whole vectors (Head::width), so that the products and the loops over a
// row have no leftover columns.
//
// qkv may be bfloat16 (--precision bf16: the projection's output as oneDNN wrote it);
// context and dqkv (and dcontext) are then bfloat16 too, and each example's rows are
// converted to float32 into the thread's scratch memory before its heads are computed
// in float32 (and back after): no cast of the whole arrays before and after the
// kernel, and qkv is kept for the backward pass in half the bytes. The two products
// whose operands are both bfloat16 already, s Q K^T (twice: forward, and recomputed
// backward) and dC V^T, run on the CPU's bfloat16 dot products instead (gemm.h's
// gemm_bf16_nt, avx512_bf16): the same products of the same numbers, summed in float32.
#include <omp.h>

#include "common.h"
#include "gemm.h"
#include "int8_rows.h"

using namespace d2lbert;

namespace {

// Where the rows of each example are, in either layout.
class Layout {
 public:
  Layout(const MXTensor& qkv, MXTensor& valid_lens, const Attributes& attrs)
      : heads_(int_attribute(attrs, "heads", 1)), batch_(valid_lens.shape[0]),
        rows_(qkv.size() / qkv.shape.back()), hidden_(qkv.shape.back() / 3),
        first_query_only_(int_attribute(attrs, "first_query_only", 0) != 0),
        first_row_(batch_ + 1, 0), lengths_(batch_, 0) {
    const bool packed = qkv.shape.size() == 2;
    const int32_t* lens = valid_lens.data<int32_t>();
    const int64_t seq = packed ? rows_ : qkv.shape[1];
    for (int64_t b = 0; b < batch_; ++b) {
      lengths_[b] = static_cast<int>(std::min<int64_t>(std::max(lens[b], 0), seq));
      first_row_[b + 1] = first_row_[b] + (packed ? lengths_[b] : seq);
    }
  }
  // packed: the rows the examples fill must fit in qkv
  bool fits() const { return first_row_[batch_] <= rows_; }
  int64_t batch() const { return batch_; }
  int64_t heads() const { return heads_; }
  int64_t first_row(int64_t b) const { return first_row_[b]; }
  // example b's rows, and how many of them (from the first) are attended as queries
  int queries(int64_t b) const { return static_cast<int>(first_row_[b + 1] - first_row_[b]); }
  int attended(int64_t b) const {
    return first_query_only_ ? std::min(queries(b), 1) : queries(b);
  }
  int keys(int64_t b) const { return lengths_[b]; }
  int max_queries() const {
    int most = 0;
    for (int64_t b = 0; b < batch_; ++b) most = std::max(most, queries(b));
    return most;
  }
  int64_t used_rows() const { return first_row_[batch_]; }
  int64_t rows() const { return rows_; }
  int64_t hidden() const { return hidden_; }
  int head_dim() const { return static_cast<int>(hidden_ / heads_); }

 private:
  int64_t heads_, batch_, rows_, hidden_;
  bool first_query_only_;
  std::vector<int64_t> first_row_;
  std::vector<int> lengths_;
};

// n rounded up to a multiple of kVector
int whole_vectors(int n) { return (n + kVector - 1) / kVector * kVector; }

// Head j of example b: where its queries, keys and values are in the example's rows
// of qkv (`rows`, row stride ld = 3H), and which rows of the outputs are its.
//
// With bfloat16 qkv, `raw` is the example's rows as they are (bfloat16 words): the
// products of two bfloat16 operands with the sum over d (s Q K^T, dC V^T) then run on
// bfloat16 dot products (gemm.h's gemm_bf16_nt) instead of the rows' float32 copies.
struct Head {
  const float *q, *k, *v;
  const uint16_t *qb = nullptr, *kb = nullptr, *vb = nullptr;  // bfloat16 rows, or null
  int64_t j, first_row;  // the example's first query
  int example_rows, queries, keys, d, ld;  // the first `queries` of its rows attended
  int width;  // keys rounded up to whole vectors: the row stride of its scores
  Head(const Layout& layout, const float* rows, int64_t b, int64_t j,
       const uint16_t* raw = nullptr)
      : j(j), first_row(layout.first_row(b)), example_rows(layout.queries(b)),
        queries(layout.attended(b)), keys(layout.keys(b)), d(layout.head_dim()),
        ld(static_cast<int>(3 * layout.hidden())), width(whole_vectors(keys)) {
    q = rows + j * 3 * d;
    k = q + d;
    v = q + 2 * d;
    if (raw != nullptr && kHasBf16Dot && d % 2 == 0) {
      qb = raw + j * 3 * d;
      kb = qb + d;
      vb = qb + 2 * d;
    }
  }
  // Its first query's row in the dropout mask, (rows * heads) rows: row r of qkv has
  // mask rows r * heads + j, so a query's mask depends on its own row only, not on
  // how many rows qkv has.
  int64_t mask_row(const Layout& layout) const { return first_row * layout.heads() + j; }
  // Its first query's entry in the log-sum-exp output (heads, rows)
  int64_t lse_index(const Layout& layout) const { return j * layout.rows() + first_row; }
};

// A thread's working memory, for examples of up to `queries` rows; with `hidden`
// (bfloat16 arrays), room for an example's rows of qkv, context and their gradients
// in float32
struct Scratch {
  std::vector<float> keys_t, values_t, probs, weights, mask, dscores, gemm, inverse;
  std::vector<float> qkv_rows, dqkv_rows, context_rows;
  std::vector<uint32_t> pairs;  // gemm_bf16_nt's
  Prefetch prefetch;            // the next example's rows, during this one's products
  Scratch(int queries, int d, int64_t hidden = 0)
      : keys_t(static_cast<size_t>(d) * whole_vectors(queries)), values_t(keys_t.size()),
        probs(static_cast<size_t>(queries) * whole_vectors(queries)), weights(probs.size()),
        mask(probs.size()), dscores(probs.size()),
        gemm(gemm_scratch_size(std::max(queries, d))), inverse(queries),
        qkv_rows(queries * 3 * hidden), dqkv_rows(qkv_rows.size()),
        context_rows(queries * hidden), pairs(hidden ? bf16_pairs_size(queries, d) : 0) {}
};

template <typename T>
void zero_rows(T* x, int64_t rows, int64_t width, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) std::fill(x + r * ld, x + r * ld + width, T{});
}

// `count` numbers from x as float32: x itself, or converted into `buffer`
const float* as_floats(const float* x, int64_t count, std::vector<float>* buffer) {
  return x;
}
const float* as_floats(const Bfloat16* x, int64_t count, std::vector<float>* buffer) {
  float* out = buffer->data();
#pragma omp simd
  for (int64_t i = 0; i < count; ++i) out[i] = to_float(x[i]);
  return out;
}

// The integer sums of an int8 Q/K/V projection (d2lbert_int8_attention), rows of
// `width` (3H) numbers, read as d2lbert_dequantize would write them; `x + count` is
// the sums `count` numbers (whole rows) on, as for a pointer.
struct Int8Sums {
  const int32_t* sums;
  const float *row_scales, *column_scales, *bias;
  const int32_t *zero_points, *weight_sums;
  int64_t width;
  Int8Sums operator+(int64_t count) const {
    Int8Sums later = *this;
    later.sums += count;
    later.row_scales += count / width;
    later.zero_points += count / width;
    return later;
  }
};

// `count` numbers (whole rows) of int8 sums scaled back to float32 into `buffer`
const float* as_floats(const Int8Sums& x, int64_t count, std::vector<float>* buffer) {
  float* out = buffer->data();
  for (int64_t r = 0; r < count / x.width; ++r)
    dequantize_row(x.sums + r * x.width, x.row_scales[r], x.zero_points[r], x.column_scales,
                   x.weight_sums, x.bias, x.width, out + r * x.width);
  return out;
}

// The bfloat16 words of x, or null for float32 x (or int8 sums)
const uint16_t* bfloat16_words(const float* x) { return nullptr; }
const uint16_t* bfloat16_words(const Bfloat16* x) {
  return reinterpret_cast<const uint16_t*>(x);
}
const uint16_t* bfloat16_words(const Int8Sums& x) { return nullptr; }

// Where x's numbers lie in memory (to prefetch them)
template <typename T>
const T* address(const T* x) { return x; }
const int32_t* address(const Int8Sums& x) { return x.sums; }

// Where to compute float32 results that go to x: x itself, or `buffer` (then `store`)
float* float_rows(float* x, std::vector<float>* buffer) { return x; }
float* float_rows(Bfloat16* x, std::vector<float>* buffer) { return buffer->data(); }

void store(const float* from, int64_t count, float* to) {}  // computed in place
void store(const float* from, int64_t count, Bfloat16* to) {
#pragma omp simd
  for (int64_t i = 0; i < count; ++i) to[i] = from_float<Bfloat16>(from[i]);
}

// How many tiles example b's products have, `products` per head (their outputs are
// queries x d or queries x keys, here taken as d wide): the next example's rows are
// prefetched over them. Without a prefetch, the loads of each new example stall the
// arithmetic (the kernel took 1.1x as long); prefetched all at once before the
// example (one instruction per cache line), they stalled it too, waiting for free
// slots to track the loads (12% of the kernel's time in `perf`).
int64_t product_tiles(const Layout& layout, int64_t b, int products) {
  return layout.heads() * products * ((layout.queries(b) + kTileRows - 1) / kTileRows) *
         ((layout.head_dim() + kTileColumns - 1) / kTileColumns);
}

// scratch->probs = s Q K^T, (queries, keys), row stride h.width, 0 in the columns
// beyond keys
void scaled_scores(const Head& h, Scratch* scratch) {
  const float s = 1.f / std::sqrt(static_cast<float>(h.d));
  if (h.kb != nullptr) {
    gemm_bf16_nt(h.queries, h.keys, h.d, s, h.qb, h.ld, h.kb, h.ld, scratch->probs.data(),
                 h.width, scratch->pairs.data(), &scratch->prefetch);
    return;
  }
  transpose(h.k, h.keys, h.d, h.ld, scratch->keys_t.data(), h.width);
  gemm(h.queries, h.width, h.d, s, {h.q, h.ld, 1}, scratch->keys_t.data(), h.width,
       scratch->probs.data(), h.width, false, scratch->gemm.data(), &scratch->prefetch);
}

// The largest of x[0, n), n a multiple of kVector. Rows of scores are short (tens of
// keys): a loop with an OpenMP max reduction compiled to one scalar compare per
// element, and a sum reduction to 16 lanes added up one by one through memory; so
// both are written with vector accumulators and a lane-by-lane finish.
float row_max(const float* x, int n) {
  Vector most = Vector{} - INFINITY;
  for (int c = 0; c < n; c += kVector) {
    const Vector v = load(x + c);
    most = v > most ? v : most;
  }
  return lanes_max(most);
}

// sum(x[c]) over c in [0, n), n a multiple of kVector
float row_sum(const float* x, int n) {
  Vector sum = Vector{};
  for (int c = 0; c < n; c += kVector) sum += load(x + c);
  return lanes_sum(sum);
}

// The softmax's numerators exp(x - max) of the first n columns of each row, in place;
// each row's 1 / sum of them into inverse and its log-sum-exp into lse (the forward
// pass's weights then scale the numerators by inverse, with the dropout mask). The
// loops run over whole vectors, the padding columns [n, width) included: -inf for the
// maximum, 0 after the exp (exp_nonpositive(-inf) is about 2e-38, which the scaling and
// the dropout would turn into subnormal numbers, slow to compute with: the forward pass
// took 1.2x as long). No product reads them: W V and the backward's products take the
// first n columns only.
void softmax_rows(float* scores, int rows, int n, int width, float* inverse, float* lse) {
  for (int r = 0; r < rows; ++r) {
    float* row = scores + static_cast<int64_t>(r) * width;
    std::fill(row + n, row + width, -INFINITY);
    const float max = row_max(row, width);
#pragma omp simd
    for (int c = 0; c < width; ++c) row[c] = exp_nonpositive(row[c] - max);
    std::fill(row + n, row + width, 0.f);
    const float sum = row_sum(row, width);
    inverse[r] = 1.f / sum;
    lse[r] = max + std::log(sum);
  }
}

// The forward pass's W = softmax * mask / (1 - p) from softmax_rows' numerators and
// inverses, in one pass over each row: into `weights`, or in place without dropout.
// Returns W. Query r's mask row is first_row + r * row_step.
const float* forward_weights(const Dropout& dropout, int64_t first_row, int64_t row_step,
                             float* numerators, int rows, int width, const float* inverse,
                             float* weights) {
  for (int r = 0; r < rows; ++r) {
    float* e = numerators + static_cast<int64_t>(r) * width;
    if (!dropout.active()) {
#pragma omp simd
      for (int c = 0; c < width; ++c) e[c] *= inverse[r];
      continue;
    }
    float* w = weights + static_cast<int64_t>(r) * width;
    const uint32_t key = dropout.row_key(first_row + r * row_step);
    const float scale = dropout.keep_scale() * inverse[r];
    for (int c = 0; c < width; ++c) w[c] = dropout.keeps(key, c) ? e[c] * scale : 0.f;
  }
  return dropout.active() ? weights : numerators;
}

// The softmax again, from the scores and the forward pass's log-sum-exp, over whole
// vectors: the padding columns get values no product reads (dW's padding is 0, as
// V^T's is, so they add nothing to softmax_backward's sums either).
void softmax_from_lse(float* scores, int rows, int width, const float* lse) {
  for (int r = 0; r < rows; ++r) {
    float* row = scores + static_cast<int64_t>(r) * width;
    const float row_lse = lse[r];
#pragma omp simd
    for (int c = 0; c < width; ++c) {
      const float x = row[c] - row_lse;  // <= 0 up to rounding
      row[c] = exp_nonpositive(x < 0.f ? x : 0.f);
    }
  }
}

// The backward pass's dropout of P (rows, width): its mask, and W = P * mask, in one
// pass over each row. Query r's mask row is first_row + r * row_step.
void dropout_backward_weights(const Dropout& dropout, int64_t first_row, int64_t row_step,
                              const float* probs, int rows, int width, float* mask,
                              float* weights) {
  const float scale = dropout.keep_scale();
  for (int r = 0; r < rows; ++r) {
    const int64_t offset = static_cast<int64_t>(r) * width;
    const uint32_t key = dropout.row_key(first_row + r * row_step);
    for (int c = 0; c < width; ++c) {
      const float keep = dropout.keeps(key, c) ? scale : 0.f;
      mask[offset + c] = keep;
      weights[offset + c] = keep * probs[offset + c];
    }
  }
}

// Head h forward: its columns of the example's rows of context, its queries'
// log-sum-exp
void head_forward(const Layout& layout, const Head& h, const Dropout& dropout,
                  float* context_rows, float* lse, Scratch* scratch) {
  const int64_t H = layout.hidden();
  float* c = context_rows + h.j * h.d;
  if (h.keys == 0) {
    zero_rows(c, h.queries, h.d, H);
    return;
  }
  scaled_scores(h, scratch);
  float* inverse = scratch->inverse.data();
  softmax_rows(scratch->probs.data(), h.queries, h.keys, h.width, inverse,
               lse + h.lse_index(layout));
  const float* w = forward_weights(dropout, h.mask_row(layout), layout.heads(),
                                   scratch->probs.data(), h.queries, h.width, inverse,
                                   scratch->weights.data());
  gemm(h.queries, h.d, h.keys, 1.f, {w, h.width, 1}, h.v, h.ld, c, H, false,
       scratch->gemm.data(), &scratch->prefetch);
}

// dZ = P * (dP - rowsum(dP * P)) in place of dP (rows, n; n a multiple of kVector);
// dP = dW * mask if dropout, formed in the same pass as the row sum
void softmax_backward(float* dz, const float* probs, const float* mask, int rows, int n) {
  for (int r = 0; r < rows; ++r) {
    float* row = dz + static_cast<int64_t>(r) * n;
    const float* p = probs + static_cast<int64_t>(r) * n;
    const float* m = mask ? mask + static_cast<int64_t>(r) * n : nullptr;
    Vector sum = Vector{};
    for (int c = 0; c < n; c += kVector) {
      const Vector dp = m ? load(row + c) * load(m + c) : load(row + c);
      d2lbert::store(row + c, dp);
      sum += dp * load(p + c);
    }
    const float dot = lanes_sum(sum);
    for (int c = 0; c < n; ++c) row[c] = p[c] * (row[c] - dot);
  }
}

// Head h backward: its columns of the example's rows of dqkv, from theirs of dcontext
// (and of its bfloat16 words `dcontext_raw`, with a bfloat16 Head, else null)
void head_backward(const Layout& layout, const Head& h, const Dropout& dropout,
                   const float* dcontext_rows, const uint16_t* dcontext_raw, const float* lse,
                   float* dqkv_rows, Scratch* scratch) {
  const int64_t H = layout.hidden();
  const int n = h.keys;
  float* dq = dqkv_rows + h.j * 3 * h.d;
  float *dk = dq + h.d, *dv = dq + 2 * h.d;
  const float* dc = dcontext_rows + h.j * h.d;
  zero_rows(dk + static_cast<int64_t>(n) * h.ld, h.example_rows - n, h.d, h.ld);
  zero_rows(dv + static_cast<int64_t>(n) * h.ld, h.example_rows - n, h.d, h.ld);
  zero_rows(dq + static_cast<int64_t>(h.queries) * h.ld, h.example_rows - h.queries, h.d,
            h.ld);
  if (n == 0) {
    zero_rows(dq, h.queries, h.d, h.ld);
    return;
  }
  scaled_scores(h, scratch);
  float* probs = scratch->probs.data();
  const int width = h.width;  // the row stride of probs, weights, mask and dz
  softmax_from_lse(probs, h.queries, width, lse + h.lse_index(layout));
  const float* w = probs;
  if (dropout.active()) {
    dropout_backward_weights(dropout, h.mask_row(layout), layout.heads(), probs, h.queries,
                             width, scratch->mask.data(), scratch->weights.data());
    w = scratch->weights.data();
  }
  float* dz = scratch->dscores.data();  // dW, then dZ: (queries, n)
  float* gemm_scratch = scratch->gemm.data();
  Prefetch* prefetch = &scratch->prefetch;
  if (h.vb != nullptr) {                                                    // dW = dC V^T
    gemm_bf16_nt(h.queries, n, h.d, 1.f, dcontext_raw + h.j * h.d, H, h.vb, h.ld, dz, width,
                 scratch->pairs.data(), prefetch);
  } else {
    transpose(h.v, n, h.d, h.ld, scratch->values_t.data(), width);
    gemm(h.queries, width, h.d, 1.f, {dc, H, 1}, scratch->values_t.data(), width, dz, width,
         false, gemm_scratch, prefetch);
  }
  gemm(n, h.d, h.queries, 1.f, {w, 1, width}, dc, H, dv, h.ld, false, gemm_scratch,  // W^T dC
       prefetch);
  softmax_backward(dz, probs, dropout.active() ? scratch->mask.data() : nullptr, h.queries,
                   width);
  const float s = 1.f / std::sqrt(static_cast<float>(h.d));
  gemm(h.queries, h.d, n, s, {dz, width, 1}, h.k, h.ld, dq, h.ld, false, gemm_scratch,  // dZ K
       prefetch);
  gemm(n, h.d, h.queries, s, {dz, 1, width}, h.q, h.ld, dk, h.ld, false, gemm_scratch,  // dZ^T Q
       prefetch);
}

// Example b's rows that are not attended (first_query_only): their context rows 0
// (context_rows: the example's) and their lse 0
void zero_unattended(const Layout& layout, int64_t b, float* context_rows, float* lse) {
  const int attended = layout.attended(b), rows = layout.queries(b);
  if (attended == rows) return;
  const int64_t H = layout.hidden();
  zero_rows(context_rows + attended * H, rows - attended, H, H);
  for (int64_t j = 0; j < layout.heads(); ++j)
    std::fill_n(lse + j * layout.rows() + layout.first_row(b) + attended, rows - attended,
                0.f);
}

MXReturnValue check_layout(const Layout& layout) {
  if (!layout.fits()) {
    MX_ERROR_MSG << "d2lbert_attention: packed qkv has " << layout.rows()
                 << " rows, fewer than sum(valid_lens) = " << layout.used_rows();
    return MX_FAIL;
  }
  return MX_SUCCESS;
}

// The forward pass with qkv (Q): const float*, const Bfloat16* or Int8Sums, and context
// of type T (float or Bfloat16)
template <typename Q, typename T>
void forward(const Layout& layout, Q qkv, const Dropout& dropout, T* context, float* lse) {
  const int64_t H = layout.hidden(), used = layout.used_rows();
  zero_rows(context + used * H, layout.rows() - used, H, H);
#pragma omp parallel
  {
    Scratch scratch(layout.max_queries(), layout.head_dim(),
                    std::is_same<Q, const float*>::value ? 0 : H);
#pragma omp for schedule(static)
    for (int64_t b = 0; b < layout.batch(); ++b) {
      scratch.prefetch = Prefetch();
      if (b + 1 < layout.batch()) {  // during the scores and W V
        const int64_t next = layout.first_row(b + 1), rows = layout.queries(b + 1);
        const auto* next_rows = address(qkv + next * 3 * H);
        scratch.prefetch.add(next_rows, rows * 3 * H * sizeof(*next_rows), false);
        scratch.prefetch.spread_over(product_tiles(layout, b, 2));
      }
      const int64_t first = layout.first_row(b), queries = layout.queries(b);
      const float* rows = as_floats(qkv + first * 3 * H, queries * 3 * H, &scratch.qkv_rows);
      float* context_rows = float_rows(context + first * H, &scratch.context_rows);
      const uint16_t* raw = bfloat16_words(qkv + first * 3 * H);
      for (int64_t j = 0; j < layout.heads(); ++j)
        head_forward(layout, Head(layout, rows, b, j, raw), dropout, context_rows, lse,
                     &scratch);
      zero_unattended(layout, b, context_rows, lse);
      store(context_rows, queries * H, context + first * H);
    }
  }
}

// The backward pass with qkv, dcontext and dqkv of type T (float or Bfloat16)
template <typename T>
void backward(const Layout& layout, const T* qkv, const T* dcontext, const float* lse,
              const Dropout& dropout, T* dqkv) {
  const int64_t H = layout.hidden(), used = layout.used_rows();
  zero_rows(dqkv + used * 3 * H, layout.rows() - used, 3 * H, 3 * H);
#pragma omp parallel
  {
    Scratch scratch(layout.max_queries(), layout.head_dim(),
                    std::is_same<T, float>::value ? 0 : H);
#pragma omp for schedule(static)
    for (int64_t b = 0; b < layout.batch(); ++b) {
      scratch.prefetch = Prefetch();
      if (b + 1 < layout.batch()) {  // during the scores, dW, W^T dC, dZ K and dZ^T Q
        const int64_t next = layout.first_row(b + 1), rows = layout.queries(b + 1);
        scratch.prefetch.add(qkv + next * 3 * H, rows * 3 * H * sizeof(T), false);
        scratch.prefetch.add(dcontext + next * H, rows * H * sizeof(T), false);
        scratch.prefetch.add(dqkv + next * 3 * H, rows * 3 * H * sizeof(T), true);
        scratch.prefetch.spread_over(product_tiles(layout, b, 5));
      }
      const int64_t first = layout.first_row(b), queries = layout.queries(b);
      const float* rows = as_floats(qkv + first * 3 * H, queries * 3 * H, &scratch.qkv_rows);
      const float* dcontext_rows = as_floats(dcontext + first * H, queries * H,
                                             &scratch.context_rows);
      float* dqkv_rows = float_rows(dqkv + first * 3 * H, &scratch.dqkv_rows);
      const uint16_t* raw = bfloat16_words(qkv + first * 3 * H);
      const uint16_t* dcontext_raw = bfloat16_words(dcontext + first * H);
      for (int64_t j = 0; j < layout.heads(); ++j)
        head_backward(layout, Head(layout, rows, b, j, raw), dropout, dcontext_rows,
                      dcontext_raw, lse, dqkv_rows, &scratch);
      store(dqkv_rows, queries * 3 * H, dqkv + first * 3 * H);
    }
  }
}

}  // namespace

// inputs: qkv, valid_lens, training; outputs: context, lse, seed
MXReturnValue attention_forward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                                std::vector<MXTensor>* outputs, const OpResource& res) {
  const Layout layout((*inputs)[0], (*inputs)[1], attrs);
  if (check_layout(layout) != MX_SUCCESS) return MX_FAIL;
  Dropout dropout = dropout_of(attrs, (*inputs)[2]);
  draw_seed(res, &dropout, &(*outputs)[2]);
  float* lse = (*outputs)[1].data<float>();
  void *qkv = (*inputs)[0].data_ptr, *context = (*outputs)[0].data_ptr;
  if ((*inputs)[0].dtype == kBfloat16)
    forward(layout, static_cast<const Bfloat16*>(qkv), dropout,
            static_cast<Bfloat16*>(context), lse);
  else
    forward(layout, static_cast<const float*>(qkv), dropout, static_cast<float*>(context),
            lse);
  return MX_SUCCESS;
}

// inputs: sums, row_scales, zero_points, column_scales, weight_sums, bias, valid_lens;
// outputs: context, lse. The attention (without dropout: inference only) of the Q/K/V
// projection y = d2lbert_dequantize(sums, ...) (rows, 3H), scaled back example by
// example into the thread's memory instead of going to memory whole.
MXReturnValue int8_attention_forward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                                     std::vector<MXTensor>* outputs, const OpResource& res) {
  MXTensor& sums = (*inputs)[0];
  const Layout layout(sums, (*inputs)[6], attrs);
  if (check_layout(layout) != MX_SUCCESS) return MX_FAIL;
  const Int8Sums qkv{sums.data<int32_t>(), (*inputs)[1].data<float>(),
                     (*inputs)[3].data<float>(), (*inputs)[5].data<float>(),
                     (*inputs)[2].data<int32_t>(), (*inputs)[4].data<int32_t>(),
                     sums.shape.back()};
  forward(layout, qkv, Dropout(), (*outputs)[0].data<float>(), (*outputs)[1].data<float>());
  return MX_SUCCESS;
}

// inputs: dcontext, dlse, dseed (unused), qkv, valid_lens, training, context, lse, seed;
// outputs: dqkv, dvalid_lens, dtraining (0: not differentiable)
MXReturnValue attention_backward(const Attributes& attrs, std::vector<MXTensor>* inputs,
                                 std::vector<MXTensor>* outputs, const OpResource& res) {
  const Layout layout((*inputs)[3], (*inputs)[4], attrs);
  if (check_layout(layout) != MX_SUCCESS) return MX_FAIL;
  const float* lse = (*inputs)[7].data<float>();
  const Dropout dropout = saved_dropout(attrs, (*inputs)[5], (*inputs)[8]);
  std::fill_n((*outputs)[1].data<int32_t>(), (*outputs)[1].size(), 0);
  (*outputs)[2].data<float>()[0] = 0.f;
  void *dcontext = (*inputs)[0].data_ptr, *qkv = (*inputs)[3].data_ptr;
  void* dqkv = (*outputs)[0].data_ptr;
  if ((*inputs)[3].dtype == kBfloat16)
    backward(layout, static_cast<const Bfloat16*>(qkv), static_cast<const Bfloat16*>(dcontext),
             lse, dropout, static_cast<Bfloat16*>(dqkv));
  else
    backward(layout, static_cast<const float*>(qkv), static_cast<const float*>(dcontext),
             lse, dropout, static_cast<float*>(dqkv));
  return MX_SUCCESS;
}

MXReturnValue attention_infer_type(const Attributes& attrs, std::vector<int>* in_types,
                                   std::vector<int>* out_types) {
  // qkv may be bfloat16 (context is then bfloat16 too)
  const int qkv = (*in_types)[0];
  std::vector<int> as_float32 = *in_types;
  if (qkv == kBfloat16) as_float32[0] = kFloat32;
  if (check_types("d2lbert_attention", as_float32, {1}) != MX_SUCCESS) return MX_FAIL;
  (*out_types) = {qkv, kFloat32, kInt32};
  return MX_SUCCESS;
}

MXReturnValue attention_infer_shape(const Attributes& attrs,
                                    std::vector<std::vector<unsigned int>>* in_shapes,
                                    std::vector<std::vector<unsigned int>>* out_shapes) {
  const std::vector<unsigned int>& qkv = (*in_shapes)[0];
  const std::vector<unsigned int>& valid_lens = (*in_shapes)[1];
  const int heads = int_attribute(attrs, "heads", 1);
  const bool padded = qkv.size() == 3 && valid_lens == std::vector<unsigned int>{qkv[0]};
  const bool packed = qkv.size() == 2 && valid_lens.size() == 1;
  if (!(padded || packed) || heads < 1 || qkv.back() % (3 * heads) != 0 ||
      (*in_shapes)[2] != std::vector<unsigned int>{1}) {
    MX_ERROR_MSG << "d2lbert_attention: qkv must be (batch, seq, 3 * hidden) or "
                    "(tokens, 3 * hidden) with hidden divisible by heads, valid_lens "
                    "(batch,), training (1,)";
    return MX_FAIL;
  }
  std::vector<unsigned int> context = qkv;
  context.back() /= 3;
  const unsigned int rows = padded ? qkv[0] * qkv[1] : qkv[0];
  (*out_shapes)[0] = context;
  (*out_shapes)[1] = {static_cast<unsigned int>(heads), rows};
  (*out_shapes)[2] = {2};
  return MX_SUCCESS;
}

REGISTER_OP(d2lbert_attention)
.setForward(attention_forward, "cpu")
.setBackward(attention_backward, "cpu")
.setParseAttrs(fixed_arity<3, 3>)
.setInferType(attention_infer_type)
.setInferShape(attention_infer_shape);

MXReturnValue int8_attention_infer_type(const Attributes& attrs, std::vector<int>* in_types,
                                        std::vector<int>* out_types) {
  if (check_types("d2lbert_int8_attention", *in_types, {0, 2, 4, 6}) != MX_SUCCESS)
    return MX_FAIL;
  (*out_types) = {kFloat32, kFloat32};
  return MX_SUCCESS;
}

// sums as d2lbert_attention's qkv; row_scales, zero_points (rows,); column_scales,
// weight_sums, bias (3H,); valid_lens (batch,)
MXReturnValue int8_attention_infer_shape(const Attributes& attrs,
                                         std::vector<std::vector<unsigned int>>* in_shapes,
                                         std::vector<std::vector<unsigned int>>* out_shapes) {
  const std::vector<unsigned int>& sums = (*in_shapes)[0];
  std::vector<std::vector<unsigned int>> as_attention = {sums, (*in_shapes)[6], {1}};
  std::vector<std::vector<unsigned int>> attention_outputs(3);
  if (attention_infer_shape(attrs, &as_attention, &attention_outputs) != MX_SUCCESS)
    return MX_FAIL;
  const std::vector<unsigned int> rows = {attention_outputs[1][1]}, columns = {sums.back()};
  if ((*in_shapes)[1] != rows || (*in_shapes)[2] != rows || (*in_shapes)[3] != columns ||
      (*in_shapes)[4] != columns || (*in_shapes)[5] != columns) {
    MX_ERROR_MSG << "d2lbert_int8_attention: row_scales and zero_points (rows,), "
                    "column_scales, weight_sums and bias (3 * hidden,)";
    return MX_FAIL;
  }
  (*out_shapes)[0] = attention_outputs[0];
  (*out_shapes)[1] = attention_outputs[1];
  return MX_SUCCESS;
}

REGISTER_OP(d2lbert_int8_attention)
.setForward(int8_attention_forward, "cpu")
.setBackward(zero_gradients, "cpu")
.setParseAttrs(fixed_arity<7, 2>)
.setInferType(int8_attention_infer_type)
.setInferShape(int8_attention_infer_shape);
