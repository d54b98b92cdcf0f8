// Small matrix products, for matrices that fit in the CPU's caches (the attention
// kernel's per-head products: tens to hundreds of rows and columns).
//
// A BLAS library is built for large matrices: each call copies ("packs") both inputs
// into its own layout first, which for a 64 x 64 product costs about as much as the
// product. Here a register-blocked micro-kernel reads the inputs where they are:
// a tile of MR x 2V outputs (V floats per vector register) stays in registers while
// it sums over k, each step one broadcast element of A per row times two vectors of
// B's row. The compiler turns GCC's vector types into the CPU's vector instructions
// (-march=native). On a CPU with avx512_bf16, `gemm_bf16_nt` multiplies bfloat16 rows
// with the CPU's bfloat16 dot products.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace d2lbert {

#if defined(__AVX512F__)
constexpr int kVector = 16, kTileRows = 8;  // 32 registers of 16 floats
#else
constexpr int kVector = 8, kTileRows = 6;   // 16 registers of 8 floats (AVX2)
#endif
constexpr int kTileColumns = 2 * kVector;
typedef float Vector __attribute__((vector_size(kVector * sizeof(float)), aligned(4)));

inline Vector load(const float* p) { return *reinterpret_cast<const Vector*>(p); }
inline void store(float* p, Vector v) { *reinterpret_cast<Vector*>(p) = v; }

// The sum and the largest of a vector's lanes, in log2(kVector) halvings: a chain of
// kVector scalar steps, which a loop over the lanes compiles to, made each short row
// of attention scores wait on it.
#if defined(__AVX512F__)
inline float lanes_sum(Vector v) { return _mm512_reduce_add_ps(reinterpret_cast<__m512>(v)); }
inline float lanes_max(Vector v) { return _mm512_reduce_max_ps(reinterpret_cast<__m512>(v)); }
#else
inline float lanes_sum(Vector v) {
  float x[kVector];
  std::memcpy(x, &v, sizeof x);
  for (int half = kVector / 2; half > 0; half /= 2)
    for (int i = 0; i < half; ++i) x[i] += x[i + half];
  return x[0];
}
inline float lanes_max(Vector v) {
  float x[kVector];
  std::memcpy(x, &v, sizeof x);
  for (int half = kVector / 2; half > 0; half /= 2)
    for (int i = 0; i < half; ++i) x[i] = std::max(x[i], x[i + half]);
  return x[0];
}
#endif

// A matrix read in place: element (i, p) at data[i * row_stride + p * column_stride],
// so a transposed matrix is the same data with the strides swapped.
struct Matrix {
  const float* data;
  long row_stride, column_stride;
  float operator()(long i, long p) const { return data[i * row_stride + p * column_stride]; }
  Matrix rows_from(long i) const { return {data + i * row_stride, row_stride, column_stride}; }
};

// C[R x W V] (= or +=) alpha * A[R x k] B[k x W V], B row-major with row stride ldb:
// W = 2 vectors of columns, or 1 for the last columns of a product when 16 or fewer.
// A is passed by reference: passed by value, the 24-byte Matrix went through the
// stack at every call as two 8-byte stores read back by one 16-byte load, which the
// CPU cannot forward from the stores (a stall of each tile; 6% of the attention
// kernel's time in `perf`).
template <int R, int W = 2>
inline void tile(int k, float alpha, const Matrix& A, const float* B, long ldb, float* C,
                 long ldc, bool accumulate) {
  Vector c0[R], c1[R];
  for (int i = 0; i < R; ++i) c0[i] = c1[i] = Vector{};
  for (int p = 0; p < k; ++p) {
    const Vector b0 = load(B + p * ldb);
    const Vector b1 = W == 2 ? load(B + p * ldb + kVector) : Vector{};
    for (int i = 0; i < R; ++i) {
      const float a = A(i, p);
      c0[i] += b0 * a;
      if (W == 2) c1[i] += b1 * a;
    }
  }
  for (int i = 0; i < R; ++i) {
    Vector r0 = c0[i] * alpha;
    if (accumulate) r0 += load(C + i * ldc);
    store(C + i * ldc, r0);
    if (W == 2) {
      Vector r1 = c1[i] * alpha;
      if (accumulate) r1 += load(C + i * ldc + kVector);
      store(C + i * ldc + kVector, r1);
    }
  }
}

// The same for any rows <= kTileRows (a tile per row count, chosen at run time)
template <int W = 2, int R = kTileRows>
inline void tile_rows(int rows, int k, float alpha, const Matrix& A, const float* B,
                      long ldb, float* C, long ldc, bool accumulate) {
  if constexpr (R > 0) {
    if (rows == R)
      tile<R, W>(k, alpha, A, B, ldb, C, ldc, accumulate);
    else
      tile_rows<W, R - 1>(rows, k, alpha, A, B, ldb, C, ldc, accumulate);
  }
}

// Memory to bring into the caches while products run (the attention kernel's next
// example): up to three arrays, `lines_per_tile` cache lines of them after each tile,
// so that the loads overlap with the arithmetic.
struct Prefetch {
  struct Range {
    const char *next, *end;
    bool write;  // to be written: loaded for writing
  };
  Range ranges[3];
  int count = 0, lines_per_tile = 0;
  int64_t lines = 0;  // in all

  void add(const void* data, size_t bytes, bool write) {
    const char* first = static_cast<const char*>(data);
    ranges[count++] = {first, first + bytes, write};
    lines += (bytes + 63) / 64;
  }
  void spread_over(int64_t tiles) { lines_per_tile = static_cast<int>(lines / tiles + 1); }
  void step() {
    int left = lines_per_tile;
    for (int i = 0; i < count && left > 0; ++i)
      for (Range& r = ranges[i]; r.next < r.end && left > 0; r.next += 64, --left) {
        if (r.write)
          __builtin_prefetch(r.next, 1);
        else
          __builtin_prefetch(r.next);
      }
  }
};

// Floats of scratch space `gemm` needs for k
inline size_t gemm_scratch_size(int k) { return static_cast<size_t>(k + kTileRows) * kTileColumns; }

// C[m x n] (= or +=) alpha * A[m x k] B[k x n]; B row-major (row stride ldb), C
// row-major (row stride ldc). The last n % 2V columns go through a zero-padded copy
// of B's last columns in `scratch` (gemm_scratch_size(k) floats), one vector wide if
// they fit in one. With `prefetch`, its step after each full tile.
inline void gemm(int m, int n, int k, float alpha, const Matrix& A, const float* B,
                 long ldb, float* C, long ldc, bool accumulate, float* scratch,
                 Prefetch* prefetch = nullptr) {
  const int full = n / kTileColumns * kTileColumns;
  for (int i = 0; i < m; i += kTileRows) {
    const int rows = std::min(kTileRows, m - i);
    for (int j = 0; j < full; j += kTileColumns) {
      tile_rows(rows, k, alpha, A.rows_from(i), B + j, ldb, C + i * ldc + j, ldc, accumulate);
      if (prefetch) prefetch->step();
    }
  }
  const int rest = n - full;
  if (rest == 0) return;
  if (rest == kVector) {  // one whole vector: in place, no copy
    for (int i = 0; i < m; i += kTileRows)
      tile_rows<1>(std::min(kTileRows, m - i), k, alpha, A.rows_from(i), B + full, ldb,
                   C + i * ldc + full, ldc, accumulate);
    return;
  }
  const int width = rest > kVector ? kTileColumns : kVector;
  float* panel = scratch;  // (k, width)
  float* out = scratch + static_cast<size_t>(k) * width;  // (kTileRows, width)
  for (int p = 0; p < k; ++p) {
    std::memcpy(panel + p * width, B + p * ldb + full, rest * sizeof(float));
    std::fill(panel + p * width + rest, panel + (p + 1) * width, 0.f);
  }
  for (int i = 0; i < m; i += kTileRows) {
    const int rows = std::min(kTileRows, m - i);
    if (width == kTileColumns)
      tile_rows<2>(rows, k, alpha, A.rows_from(i), panel, width, out, width, false);
    else
      tile_rows<1>(rows, k, alpha, A.rows_from(i), panel, width, out, width, false);
    for (int r = 0; r < rows; ++r) {
      float* c = C + (i + r) * ldc + full;
      const float* o = out + r * width;
      for (int j = 0; j < rest; ++j) c[j] = accumulate ? c[j] + o[j] : o[j];
    }
  }
}

// out (columns x rows, row stride out_ld: rows rounded up to whole vectors, 0 in the
// columns beyond rows) = the transpose of in (rows x columns, row stride ld). The
// attention kernel transposes K and V for every head; element by element (a strided
// store each) that took about half as long as the product that reads them. With
// AVX-512, 16 x 16 blocks are transposed in registers: 16 row loads (masked at the
// edges, zeros beyond them), 64 shuffles, 16 column stores.
#if defined(__AVX512F__)
// v[i] = row i of a 16 x 16 block becomes column i: three rounds of interleaving
// (32-bit words, 64-bit pairs, then 128-bit quarters twice)
inline void transpose_16x16(__m512 v[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
  }
  auto low_pairs = [](__m512 a, __m512 b) {  // 64-bit pairs 0, 2, 4, ... of a and b
    return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
  };
  auto high_pairs = [](__m512 a, __m512 b) {  // pairs 1, 3, 5, ...
    return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
  };
  for (int i = 0; i < 16; i += 4) {
    v[i] = low_pairs(t[i], t[i + 2]);
    v[i + 1] = high_pairs(t[i], t[i + 2]);
    v[i + 2] = low_pairs(t[i + 1], t[i + 3]);
    v[i + 3] = high_pairs(t[i + 1], t[i + 3]);
  }
  for (int h = 0; h < 16; h += 8)
    for (int i = 0; i < 4; ++i) {
      t[h + i] = _mm512_shuffle_f32x4(v[h + i], v[h + i + 4], 0x88);
      t[h + i + 4] = _mm512_shuffle_f32x4(v[h + i], v[h + i + 4], 0xdd);
    }
  for (int i = 0; i < 8; ++i) {
    v[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    v[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
  }
}

inline void transpose(const float* in, int rows, int columns, long ld, float* out,
                      long out_ld) {
  for (int r = 0; r < rows; r += 16) {
    const int block_rows = std::min(16, rows - r);
    for (int c = 0; c < columns; c += 16) {
      const int block_columns = std::min(16, columns - c);
      const __mmask16 load_mask = static_cast<__mmask16>((1u << block_columns) - 1);
      __m512 v[16];
      for (int i = 0; i < 16; ++i)
        v[i] = i < block_rows ? _mm512_maskz_loadu_ps(load_mask, in + (r + i) * ld + c)
                              : _mm512_setzero_ps();
      transpose_16x16(v);
      for (int i = 0; i < block_columns; ++i)
        _mm512_storeu_ps(out + (c + i) * out_ld + r, v[i]);
    }
  }
}
#else
inline void transpose(const float* in, int rows, int columns, long ld, float* out,
                      long out_ld) {
  for (int c = 0; c < columns; ++c) {
    for (int r = 0; r < rows; ++r) out[c * out_ld + r] = in[r * ld + c];
    std::fill(out + c * out_ld + rows, out + (c + 1) * out_ld, 0.f);
  }
}
#endif

#if defined(__AVX512BF16__)
// bfloat16 dot products (CPUs with avx512_bf16): C[m x n] = alpha * A[m x k] B[n x k]^T,
// A and B bfloat16 rows with k contiguous (raw 16-bit words, row strides lda and ldb),
// k even, C float32 (its columns n up to n rounded up to 16 are written too, with 0:
// ldc must leave room for them). vdpbf16ps multiplies pairs of bfloat16 numbers and
// adds both products to a float32 sum: twice the products of a float32 FMA per
// instruction. B's rows are first copied into `pairs` as (k / 2) rows of n pairs
// (32-bit words, zero beyond n; bf16_pairs_size(n, k) of them), so that a vector holds
// pair p of 16 rows of B; each row of A gives its pair p as a broadcast. With
// `prefetch`, its step after each tile.
constexpr bool kHasBf16Dot = true;
inline size_t bf16_pairs_size(int n, int k) {
  return static_cast<size_t>(k / 2) * ((n + kTileColumns - 1) / kTileColumns * kTileColumns);
}

template <int R>
inline void bf16_tile(int k2, float alpha, const uint16_t* A, long lda, const uint32_t* pairs,
                      long ldp, float* C, long ldc, int columns) {
  __m512 c0[R], c1[R];
  for (int i = 0; i < R; ++i) c0[i] = c1[i] = _mm512_setzero_ps();
  for (int p = 0; p < k2; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(pairs + p * ldp);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(pairs + p * ldp + 16);
    for (int i = 0; i < R; ++i) {
      uint32_t pair;
      std::memcpy(&pair, A + i * lda + 2 * p, sizeof pair);
      const __m512bh a = (__m512bh)_mm512_set1_epi32(static_cast<int>(pair));
      c0[i] = _mm512_dpbf16_ps(c0[i], a, b0);
      c1[i] = _mm512_dpbf16_ps(c1[i], a, b1);
    }
  }
  const __m512 scale = _mm512_set1_ps(alpha);
  const __mmask16 m0 = columns >= 16 ? 0xFFFF : (1u << columns) - 1;
  const __mmask16 m1 = columns >= 32 ? 0xFFFF : columns <= 16 ? 0 : (1u << (columns - 16)) - 1;
  for (int i = 0; i < R; ++i) {
    _mm512_mask_storeu_ps(C + i * ldc, m0, _mm512_mul_ps(c0[i], scale));
    _mm512_mask_storeu_ps(C + i * ldc + 16, m1, _mm512_mul_ps(c1[i], scale));
  }
}

template <int R = kTileRows>
inline void bf16_tile_rows(int rows, int k2, float alpha, const uint16_t* A, long lda,
                           const uint32_t* pairs, long ldp, float* C, long ldc, int columns) {
  if constexpr (R > 0) {
    if (rows == R)
      bf16_tile<R>(k2, alpha, A, lda, pairs, ldp, C, ldc, columns);
    else
      bf16_tile_rows<R - 1>(rows, k2, alpha, A, lda, pairs, ldp, C, ldc, columns);
  }
}

inline void gemm_bf16_nt(int m, int n, int k, float alpha, const uint16_t* A, long lda,
                         const uint16_t* B, long ldb, float* C, long ldc, uint32_t* pairs,
                         Prefetch* prefetch = nullptr) {
  const int k2 = k / 2;
  const long ldp = (n + kTileColumns - 1) / kTileColumns * kTileColumns;
  const int padded = (n + kVector - 1) / kVector * kVector;
  for (int p = 0; p < k2; ++p) {
    uint32_t* row = pairs + p * ldp;
    for (int j = 0; j < n; ++j) std::memcpy(row + j, B + j * ldb + 2 * p, sizeof(uint32_t));
    std::fill(row + n, row + ldp, 0u);
  }
  for (int i = 0; i < m; i += kTileRows) {
    const int rows = std::min(kTileRows, m - i);
    for (int j = 0; j < n; j += kTileColumns) {
      bf16_tile_rows(rows, k2, alpha, A + i * lda, lda, pairs + j, ldp, C + i * ldc + j, ldc,
                     padded - j);
      if (prefetch) prefetch->step();
    }
  }
}
#else
constexpr bool kHasBf16Dot = false;
inline size_t bf16_pairs_size(int n, int k) { return 0; }
inline void gemm_bf16_nt(int m, int n, int k, float alpha, const uint16_t* A, long lda,
                         const uint16_t* B, long ldb, float* C, long ldc, uint32_t* pairs,
                         Prefetch* prefetch = nullptr) {}
#endif

}  // namespace d2lbert
