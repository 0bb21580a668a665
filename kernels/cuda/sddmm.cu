// SDDMM  out[e] = data[e] (x) ((+)_k x[i, k] (x) y[j, k])  for every stored e = (i, j) of A.
//
// Warp per row (as SpMM): for each nonzero of the row the 32 lanes take
// strided slices of the d-long inner product (coalesced reads of x[i, :] and
// y[j, :]), then a butterfly of __shfl_xor_sync folds the 32 partials with the
// semiring's addition; lane 0 writes the one output.  The reduction order
// differs from the sequential Numba loop: float results agree to rounding.
#include "ops.cuh"

// warps per block = blockDim.x / 32, chosen by the caller (at most SDDMM_MAX_WARPS)
#define SDDMM_MAX_WARPS 8

template <typename I, typename T>
__device__ __forceinline__ void sddmm_rows(const I* indptr, const I* indices, const T* data,
                                           const T* x, const T* y, long long m, long long d,
                                           int add, int mul, T identity, T* out) {
    const int lane = threadIdx.x & 31;
    const long long row = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= m) return;
    for (long long e = indptr[row]; e < (long long)indptr[row + 1]; ++e) {
        const long long j = indices[e];
        T acc = identity;
        for (long long k = lane; k < d; k += 32) {
            acc = sr_add(add, acc, sr_mul(mul, x[row * d + k], y[j * d + k]));
        }
        for (int s = 16; s > 0; s >>= 1) {
            acc = sr_add(add, acc, __shfl_xor_sync(0xffffffffu, acc, s));
        }
        if (lane == 0) out[e] = sr_mul(mul, data[e], acc);
    }
}

extern "C" __global__ void sddmm_i32_f32(const int* indptr, const int* indices, const float* data,
                                         const float* x, const float* y, long long m, long long d,
                                         int add, int mul, float identity, float* out) {
    sddmm_rows<int, float>(indptr, indices, data, x, y, m, d, add, mul, identity, out);
}

extern "C" __global__ void sddmm_i32_f64(const int* indptr, const int* indices, const double* data,
                                         const double* x, const double* y, long long m,
                                         long long d, int add, int mul, double identity,
                                         double* out) {
    sddmm_rows<int, double>(indptr, indices, data, x, y, m, d, add, mul, identity, out);
}

extern "C" __global__ void sddmm_i64_f32(const long long* indptr, const long long* indices,
                                         const float* data, const float* x, const float* y,
                                         long long m, long long d, int add, int mul,
                                         float identity, float* out) {
    sddmm_rows<long long, float>(indptr, indices, data, x, y, m, d, add, mul, identity, out);
}

extern "C" __global__ void sddmm_i64_f64(const long long* indptr, const long long* indices,
                                         const double* data, const double* x, const double* y,
                                         long long m, long long d, int add, int mul,
                                         double identity, double* out) {
    sddmm_rows<long long, double>(indptr, indices, data, x, y, m, d, add, mul, identity, out);
}
