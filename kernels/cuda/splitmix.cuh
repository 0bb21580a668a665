// SplitMix64's finaliser, bit-identical to kernels/numba/splitmix.py (wrapping
// uint64 arithmetic), and the keyed uniform of kernels/numba/gnn.py.
#ifndef SPGNN_SPLITMIX_CUH
#define SPGNN_SPLITMIX_CUH

#define SPGNN_GOLDEN 0x9E3779B97F4A7C15ULL

__device__ __forceinline__ unsigned long long spgnn_mix64(unsigned long long z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// u = (mix64((counter ^ base) + GOLDEN) >> 11) * 2**-53, a double in [0, 1).
__device__ __forceinline__ double spgnn_uniform(unsigned long long counter,
                                                unsigned long long base) {
    return (double)(spgnn_mix64((counter ^ base) + SPGNN_GOLDEN) >> 11)
           * (1.0 / 9007199254740992.0);
}

#endif
