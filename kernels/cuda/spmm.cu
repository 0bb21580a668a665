// SpMM  y = A (+).(x) X  on CSR A (m x k) and dense row-major X (k x n).
//
// Design: GE-SpMM (Huang, Dai, Yu, Wang, Yang; SC'20), warp per row with
// "coalesced row caching": the 32 lanes of a warp load 32 nonzeros (column,
// value) of their row into shared memory with one coalesced read each, then
// every lane walks them for its own output column, so each X row segment is
// read by 32 consecutive lanes (coalesced) and A is read once per column tile
// instead of once per lane.  Why this design: GNN feature widths (16-256)
// are a few column tiles, where GE-SpMM beat cuSPARSE csrmm2 in the paper;
// the row-split keeps one writer per output element (no atomics, so results
// are deterministic and the host build's sequential blocks see every race).
// The sum over a row's nonzeros runs in storage order, as the Numba kernel.
#include "ops.cuh"

// warps per block = blockDim.x / 32, chosen by the caller (at most SPMM_MAX_WARPS)
#define SPMM_MAX_WARPS 8

template <typename I, typename T>
__device__ __forceinline__ void spmm_rows(const I* indptr, const I* indices, const T* data,
                                          const T* x, long long m, long long n, int add,
                                          int mul, T identity, T* y) {
    __shared__ I s_col[SPMM_MAX_WARPS][32];
    __shared__ T s_val[SPMM_MAX_WARPS][32];
    const int lane = threadIdx.x & 31;
    const int w = threadIdx.x >> 5;
    const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + w;
    if (row >= m) return;  // the whole warp leaves together
    const long long start = indptr[row];
    const long long end = indptr[row + 1];
    for (long long c0 = 0; c0 < n; c0 += 32) {
        const long long col = c0 + lane;
        T acc = identity;
        for (long long e0 = start; e0 < end; e0 += 32) {
            const long long e = e0 + lane;
            if (e < end) {
                s_col[w][lane] = indices[e];
                s_val[w][lane] = data[e];
            }
            __syncwarp();  // the chunk is visible to every lane
            const int cnt = (end - e0 < 32) ? (int)(end - e0) : 32;
            if (col < n) {
                for (int t = 0; t < cnt; ++t) {
                    acc = sr_add(add, acc, sr_mul(mul, s_val[w][t], x[(long long)s_col[w][t] * n + col]));
                }
            }
            __syncwarp();  // every lane is done with the chunk before it is overwritten
        }
        if (col < n) y[row * n + col] = acc;
    }
}

extern "C" __global__ void spmm_i32_f32(const int* indptr, const int* indices, const float* data,
                                        const float* x, long long m, long long n, int add,
                                        int mul, float identity, float* y) {
    spmm_rows<int, float>(indptr, indices, data, x, m, n, add, mul, identity, y);
}

extern "C" __global__ void spmm_i32_f64(const int* indptr, const int* indices, const double* data,
                                        const double* x, long long m, long long n, int add,
                                        int mul, double identity, double* y) {
    spmm_rows<int, double>(indptr, indices, data, x, m, n, add, mul, identity, y);
}

extern "C" __global__ void spmm_i64_f32(const long long* indptr, const long long* indices,
                                        const float* data, const float* x, long long m,
                                        long long n, int add, int mul, float identity, float* y) {
    spmm_rows<long long, float>(indptr, indices, data, x, m, n, add, mul, identity, y);
}

extern "C" __global__ void spmm_i64_f64(const long long* indptr, const long long* indices,
                                        const double* data, const double* x, long long m,
                                        long long n, int add, int mul, double identity,
                                        double* y) {
    spmm_rows<long long, double>(indptr, indices, data, x, m, n, add, mul, identity, y);
}
