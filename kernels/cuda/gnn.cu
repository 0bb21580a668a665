// Element-wise GNN kernels: ReLU forward/backward and counter-based dropout
// (dense and on a CSR block's stored entries), bit-identical to
// kernels/numba/gnn.py: the same keyed SplitMix64 uniform per counter
// row_id * ncols + column, the same "x * (scale or 0)" product in the value type.
// Grid-stride loops: any grid covers any size; one writer per output.
#include "splitmix.cuh"

template <typename T>
__device__ __forceinline__ void relu_fwd(const T* x, long long size, T* out, unsigned char* mask) {
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < size; t += step) {
        const T v = x[t];
        const bool pos = v > (T)0;
        mask[t] = pos ? 1 : 0;
        out[t] = pos ? v : (T)0;
    }
}

template <typename T>
__device__ __forceinline__ void relu_bwd(const T* dy, const unsigned char* mask, long long size,
                                         T* out) {
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < size; t += step) {
        out[t] = mask[t] ? dy[t] : (T)0;
    }
}

// x * s, but a NaN x comes back unchanged: a CPU multiply propagates the NaN
// operand's bits, while the GPU returns its canonical NaN (0x7fffffff), so
// without this a NaN feature would differ bit-wise between backends.
template <typename T>
__device__ __forceinline__ T times_keep_nan(T x, T s) {
    return x != x ? x : x * s;
}

// out[i, j] = x[i, j] * (scale if u(ids[i] * ncols + col0 + j) >= p else 0), x is m x k
template <typename T>
__device__ __forceinline__ void dropout_dense(const T* x, const long long* ids, long long m,
                                              long long k, long long col0, long long ncols,
                                              unsigned long long base, double p, T scale, T* out) {
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < m * k; t += step) {
        const long long i = t / k;
        const long long j = t - i * k;
        const unsigned long long c = (unsigned long long)ids[i] * (unsigned long long)ncols
                                     + (unsigned long long)col0 + (unsigned long long)j;
        const T s = spgnn_uniform(c, base) >= p ? scale : (T)0;
        out[t] = times_keep_nan(x[t], s);
    }
}

// the same on stored entries, thread per row
template <typename I, typename T>
__device__ __forceinline__ void dropout_rows(const I* indptr, const I* indices, const T* data,
                                             const long long* ids, long long m, long long col0,
                                             long long ncols, unsigned long long base, double p,
                                             T scale, T* out) {
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += step) {
        const unsigned long long row = (unsigned long long)ids[i] * (unsigned long long)ncols
                                       + (unsigned long long)col0;
        for (long long e = indptr[i]; e < (long long)indptr[i + 1]; ++e) {
            const unsigned long long c = row + (unsigned long long)(long long)indices[e];
            const T s = spgnn_uniform(c, base) >= p ? scale : (T)0;
            out[e] = times_keep_nan(data[e], s);
        }
    }
}

extern "C" __global__ void relu_f32(const float* x, long long size, float* out, unsigned char* mask) {
    relu_fwd<float>(x, size, out, mask);
}

extern "C" __global__ void relu_f64(const double* x, long long size, double* out,
                                    unsigned char* mask) {
    relu_fwd<double>(x, size, out, mask);
}

extern "C" __global__ void relu_backward_f32(const float* dy, const unsigned char* mask,
                                             long long size, float* out) {
    relu_bwd<float>(dy, mask, size, out);
}

extern "C" __global__ void relu_backward_f64(const double* dy, const unsigned char* mask,
                                             long long size, double* out) {
    relu_bwd<double>(dy, mask, size, out);
}

extern "C" __global__ void dropout_f32(const float* x, const long long* ids, long long m,
                                       long long k, long long col0, long long ncols,
                                       unsigned long long base, double p, float scale,
                                       float* out) {
    dropout_dense<float>(x, ids, m, k, col0, ncols, base, p, scale, out);
}

extern "C" __global__ void dropout_f64(const double* x, const long long* ids, long long m,
                                       long long k, long long col0, long long ncols,
                                       unsigned long long base, double p, double scale,
                                       double* out) {
    dropout_dense<double>(x, ids, m, k, col0, ncols, base, p, scale, out);
}

extern "C" __global__ void dropout_csr_i32_f32(const int* indptr, const int* indices,
                                               const float* data, const long long* ids,
                                               long long m, long long col0, long long ncols,
                                               unsigned long long base, double p, float scale,
                                               float* out) {
    dropout_rows<int, float>(indptr, indices, data, ids, m, col0, ncols, base, p, scale, out);
}

extern "C" __global__ void dropout_csr_i32_f64(const int* indptr, const int* indices,
                                               const double* data, const long long* ids,
                                               long long m, long long col0, long long ncols,
                                               unsigned long long base, double p, double scale,
                                               double* out) {
    dropout_rows<int, double>(indptr, indices, data, ids, m, col0, ncols, base, p, scale, out);
}

extern "C" __global__ void dropout_csr_i64_f32(const long long* indptr, const long long* indices,
                                               const float* data, const long long* ids,
                                               long long m, long long col0, long long ncols,
                                               unsigned long long base, double p, float scale,
                                               float* out) {
    dropout_rows<long long, float>(indptr, indices, data, ids, m, col0, ncols, base, p, scale,
                                   out);
}

extern "C" __global__ void dropout_csr_i64_f64(const long long* indptr, const long long* indices,
                                               const double* data, const long long* ids,
                                               long long m, long long col0, long long ncols,
                                               unsigned long long base, double p, double scale,
                                               double* out) {
    dropout_rows<long long, double>(indptr, indices, data, ids, m, col0, ncols, base, p, scale,
                                    out);
}
