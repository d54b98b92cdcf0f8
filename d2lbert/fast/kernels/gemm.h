// Small matrix products, for matrices that fit in the CPU's caches (the attention
// kernel's per-head products: tens to hundreds of rows and columns).
//
// A BLAS library is built for large matrices: each call copies ("packs") both inputs
// into its own layout first, which for a 64 x 64 product costs about as much as the
// product. Here a register-blocked micro-kernel reads the inputs where they are:
// a tile of MR x 2V outputs (V floats per vector register) stays in registers while
// it sums over k, each step one broadcast element of A per row times two vectors of
// B's row. The compiler turns GCC's vector types into the CPU's vector instructions
// (-march=native).
#pragma once

#include <algorithm>
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

// A matrix read in place: element (i, p) at data[i * row_stride + p * column_stride],
// so a transposed matrix is the same data with the strides swapped.
struct Matrix {
  const float* data;
  long row_stride, column_stride;
  float operator()(long i, long p) const { return data[i * row_stride + p * column_stride]; }
  Matrix rows_from(long i) const { return {data + i * row_stride, row_stride, column_stride}; }
};

// C[R x 2V] (= or +=) alpha * A[R x k] B[k x 2V], B row-major with row stride ldb
template <int R>
inline void tile(int k, float alpha, Matrix A, const float* B, long ldb, float* C, long ldc,
                 bool accumulate) {
  Vector c0[R], c1[R];
  for (int i = 0; i < R; ++i) c0[i] = c1[i] = Vector{};
  for (int p = 0; p < k; ++p) {
    const Vector b0 = load(B + p * ldb), b1 = load(B + p * ldb + kVector);
    for (int i = 0; i < R; ++i) {
      const float a = A(i, p);
      c0[i] += b0 * a;
      c1[i] += b1 * a;
    }
  }
  for (int i = 0; i < R; ++i) {
    Vector r0 = c0[i] * alpha, r1 = c1[i] * alpha;
    if (accumulate) {
      r0 += load(C + i * ldc);
      r1 += load(C + i * ldc + kVector);
    }
    store(C + i * ldc, r0);
    store(C + i * ldc + kVector, r1);
  }
}

// The same for any rows <= kTileRows (a tile per row count, chosen at run time)
template <int R = kTileRows>
inline void tile_rows(int rows, int k, float alpha, Matrix A, const float* B, long ldb,
                      float* C, long ldc, bool accumulate) {
  if constexpr (R > 0) {
    if (rows == R)
      tile<R>(k, alpha, A, B, ldb, C, ldc, accumulate);
    else
      tile_rows<R - 1>(rows, k, alpha, A, B, ldb, C, ldc, accumulate);
  }
}

// Floats of scratch space `gemm` needs for k
inline size_t gemm_scratch_size(int k) { return static_cast<size_t>(k + kTileRows) * kTileColumns; }

// C[m x n] (= or +=) alpha * A[m x k] B[k x n]; B row-major (row stride ldb), C
// row-major (row stride ldc). The last n % 2V columns go through a zero-padded copy
// of B's last columns in `scratch` (gemm_scratch_size(k) floats).
inline void gemm(int m, int n, int k, float alpha, Matrix A, const float* B, long ldb,
                 float* C, long ldc, bool accumulate, float* scratch) {
  const int full = n / kTileColumns * kTileColumns;
  for (int i = 0; i < m; i += kTileRows) {
    const int rows = std::min(kTileRows, m - i);
    for (int j = 0; j < full; j += kTileColumns)
      tile_rows(rows, k, alpha, A.rows_from(i), B + j, ldb, C + i * ldc + j, ldc, accumulate);
  }
  const int rest = n - full;
  if (rest == 0) return;
  float* panel = scratch;  // (k, 2V)
  float* out = scratch + static_cast<size_t>(k) * kTileColumns;  // (kTileRows, 2V)
  for (int p = 0; p < k; ++p) {
    std::memcpy(panel + p * kTileColumns, B + p * ldb + full, rest * sizeof(float));
    std::fill(panel + p * kTileColumns + rest, panel + (p + 1) * kTileColumns, 0.f);
  }
  for (int i = 0; i < m; i += kTileRows) {
    const int rows = std::min(kTileRows, m - i);
    tile_rows(rows, k, alpha, A.rows_from(i), panel, kTileColumns, out, kTileColumns, false);
    for (int r = 0; r < rows; ++r) {
      float* c = C + (i + r) * ldc + full;
      const float* o = out + r * kTileColumns;
      for (int j = 0; j < rest; ++j) c[j] = accumulate ? c[j] + o[j] : o[j];
    }
  }
}

// out (columns x rows, row stride rows) = the transpose of in (rows x columns, row
// stride ld)
inline void transpose(const float* in, int rows, int columns, long ld, float* out) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < columns; ++c) out[static_cast<long>(c) * rows + r] = in[r * ld + c];
}

}  // namespace d2lbert
