// Semiring codes and scalar helpers shared by every CUDA kernel.
// The integers equal kernels/numba/_ops.py (ADD_*, MUL_*): the backend passes
// the same codes to both (tests/cuda/test_signatures.py checks they agree).
// Built-in types only: NVRTC has no standard headers.
#ifndef SPGNN_OPS_CUH
#define SPGNN_OPS_CUH

#define SPGNN_ADD_PLUS 0
#define SPGNN_ADD_MIN 1
#define SPGNN_ADD_MAX 2
#define SPGNN_ADD_TIMES 3

#define SPGNN_MUL_TIMES 0
#define SPGNN_MUL_PLUS 1
#define SPGNN_MUL_FIRST 2
#define SPGNN_MUL_SECOND 3
#define SPGNN_MUL_PAIR 4

// acc (+) v; min/max propagate NaN like np.minimum/np.maximum (v != v).
template <typename T>
__device__ __forceinline__ T sr_add(int op, T acc, T v) {
    if (op == SPGNN_ADD_PLUS) return acc + v;
    if (op == SPGNN_ADD_MIN) return (v < acc || v != v) ? v : acc;
    if (op == SPGNN_ADD_MAX) return (v > acc || v != v) ? v : acc;
    return acc * v;
}

// a (x) b
template <typename T>
__device__ __forceinline__ T sr_mul(int op, T a, T b) {
    if (op == SPGNN_MUL_TIMES) return a * b;
    if (op == SPGNN_MUL_PLUS) return a + b;
    if (op == SPGNN_MUL_FIRST) return a;
    if (op == SPGNN_MUL_SECOND) return b;
    return (T)1;
}

#endif
