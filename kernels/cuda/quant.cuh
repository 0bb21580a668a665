// The message codec (paper 004 §2.6), bit-identical to kernels/numba/quant.py:
// per-row Z = min, S = (max - Z) / (2^b - 1) (1 for a constant row, bf16-rounded
// first when asked), v = (x - Z) * (1/S) in float32, codes rint(v) (nearest) or
// floor(v) + [u < v - floor(v)] (stochastic) clipped to [0, 2^b - 1], 8/b codes
// per byte (the first in the high bits): row-major within a peer segment (feature
// axis, ceil(n_p*F*b/8) bytes) or 8/b rows per column (node axis); decode q * S + Z.
//
// Bit-identical means: the range is found on the float bits as integers (the
// same order-preserving key as the CPU, so -0.0 vs +0.0 ties resolve alike);
// every float operation is an explicit round-to-nearest intrinsic, so NVRTC
// cannot contract a multiply and an add into an FMA; the draws are the CPU's
// (one SplitMix64 per four columns, 16-bit midpoint uniforms).
#ifndef SPGNN_QUANT_CUH
#define SPGNN_QUANT_CUH
#include "splitmix.cuh"

#ifdef __CUDACC__
__device__ __forceinline__ int qc_f2k(float v) { return __float_as_int(v); }
__device__ __forceinline__ long long qc_f2k(double v) { return __double_as_longlong(v); }
__device__ __forceinline__ float qc_k2f(int k, float) { return __int_as_float(k); }
__device__ __forceinline__ double qc_k2f(long long k, double) { return __longlong_as_double(k); }
__device__ __forceinline__ unsigned qc_fbits(float v) { return (unsigned)__float_as_int(v); }
__device__ __forceinline__ float qc_bitsf(unsigned b) { return __int_as_float((int)b); }
__device__ __forceinline__ float qc_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float qc_add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float qc_sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ float qc_rcp(float s) { return __fdiv_rn(1.0f, s); }
#else
// Host build (tests): the same operations in plain C++ (IEEE, no contraction at -O1
// on x86-64 without -mfma); bit casts by memcpy.
#include <cmath>
template <typename To, typename From>
inline To qc_cast(From v) { To o; __builtin_memcpy(&o, &v, sizeof(To)); return o; }
inline int qc_f2k(float v) { return qc_cast<int>(v); }
inline long long qc_f2k(double v) { return qc_cast<long long>(v); }
inline float qc_k2f(int k, float) { return qc_cast<float>(k); }
inline double qc_k2f(long long k, double) { return qc_cast<double>(k); }
inline unsigned qc_fbits(float v) { return qc_cast<unsigned>(v); }
inline float qc_bitsf(unsigned b) { return qc_cast<float>(b); }
inline float qc_mul(float a, float b) { volatile float r = a * b; return r; }
inline float qc_add(float a, float b) { volatile float r = a + b; return r; }
inline float qc_sub(float a, float b) { volatile float r = a - b; return r; }
inline float qc_rcp(float s) { volatile float r = 1.0f / s; return r; }
#endif

// Order-preserving integer key of a float's bits: s ^ ((s >> 31) & 0x7FFFFFFF).
template <typename T> struct QcKey;
template <> struct QcKey<float> {
    typedef int K;
    static __device__ __forceinline__ K key(K s) { return s ^ ((s >> 31) & 0x7FFFFFFF); }
    static __device__ __forceinline__ K top() { return 0x7FFFFFFF; }
    static __device__ __forceinline__ K bottom() { return (K)(-0x7FFFFFFF - 1); }
    static __device__ __forceinline__ K expo() { return 0x7F800000; }
};
template <> struct QcKey<double> {
    typedef long long K;
    static __device__ __forceinline__ K key(K s) { return s ^ ((s >> 63) & 0x7FFFFFFFFFFFFFFFLL); }
    static __device__ __forceinline__ K top() { return 0x7FFFFFFFFFFFFFFFLL; }
    static __device__ __forceinline__ K bottom() { return (K)(-0x7FFFFFFFFFFFFFFFLL - 1); }
    static __device__ __forceinline__ K expo() { return 0x7FF0000000000000LL; }
};

// float32 -> nearest bfloat16 (ties to even), as float32
__device__ __forceinline__ float qc_bf16(float x) {
    unsigned b = qc_fbits(x);
    b = (b + 0x7FFFu + ((b >> 16) & 1u)) & 0xFFFF0000u;
    return qc_bitsf(b);
}

// Warp per row (grid-stride over rows; blockDim.x a multiple of 32): Z, S and
// whether the row holds a NaN or infinity.
template <typename T>
__device__ __forceinline__ void quant_params(const T* x, long long n, long long F, int bits,
                                             int bf16, float* out_lo, float* out_scale,
                                             int* out_bad) {
    typedef QcKey<T> Q;
    typedef typename Q::K K;
    const int lane = threadIdx.x & 31;
    const long long wpb = blockDim.x / 32;
    const long long step = (long long)gridDim.x * wpb;
    for (long long i = (long long)blockIdx.x * wpb + threadIdx.x / 32; i < n; i += step) {
        K lo = Q::top(), hi = Q::bottom(), e = 0;
        for (long long c = lane; c < F; c += 32) {
            const K s = qc_f2k(x[i * F + c]);
            const K o = Q::key(s);
            lo = o < lo ? o : lo;
            hi = o > hi ? o : hi;
            const K ex = s & Q::expo();
            e = ex > e ? ex : e;
        }
        for (int off = 16; off > 0; off >>= 1) {
            const K l2 = __shfl_xor_sync(0xffffffffu, lo, off);
            const K h2 = __shfl_xor_sync(0xffffffffu, hi, off);
            const K e2 = __shfl_xor_sync(0xffffffffu, e, off);
            lo = l2 < lo ? l2 : lo;
            hi = h2 > hi ? h2 : hi;
            e = e2 > e ? e2 : e;
        }
        if (lane == 0) {
            double flo = 0.0, fhi = 0.0;
            if (F > 0) {
                flo = (double)qc_k2f(Q::key(lo), (T)0);   // the key is an involution
                fhi = (double)qc_k2f(Q::key(hi), (T)0);
            }
            float z = (float)flo;
            float s = (float)((fhi - flo) / (double)((1 << bits) - 1));
            if (s == 0.0f) s = 1.0f;
            if (bf16) {
                z = qc_bf16(z);
                s = qc_bf16(s);
                if (s == 0.0f) s = 1.0f;
            }
            out_lo[i] = z;
            out_scale[i] = s;
            out_bad[i] = (e == Q::expo()) ? 1 : 0;
        }
    }
}

// The code of element (i, c): rint(v) or floor(v) + [u < v - floor(v)], clamped.
template <typename T>
__device__ __forceinline__ unsigned qc_code(const T* x, const float* lo, const float* scale,
                                            long long i, long long c, long long F, float fq,
                                            int stochastic, unsigned long long W,
                                            unsigned long long base, const long long* row_keys) {
    const float v = qc_mul(qc_sub((float)x[i * F + c], lo[i]), qc_rcp(scale[i]));
    float q;
    if (stochastic) {
        const float fl = floorf(v);
        const unsigned long long d = spgnn_mix64(
            (((unsigned long long)row_keys[i] * W + (unsigned long long)(c >> 2)) ^ base)
            + SPGNN_GOLDEN);
        const unsigned k16 = (unsigned)((d >> (16 * (c & 3))) & 0xFFFFull);
        const float u = qc_add(qc_mul((float)k16, 1.0f / 65536.0f), 0.5f / 65536.0f);
        q = u < qc_sub(v, fl) ? qc_add(fl, 1.0f) : fl;
    } else {
        q = rintf(v);
    }
    q = q > 0.0f ? q : 0.0f;
    q = q < fq ? q : fq;
    return (unsigned)(int)q;
}

// Thread per code byte slot (group g, byte m < F), grid-stride; a group's bytes start at
// group_off[g].  Feature axis (feature != 0): byte m holds the group's row-major elements
// m*per .. m*per + per - 1 (a short group uses ceil(nr*F/per) of its F slots); node axis:
// byte m holds column m of the group's rows.
template <typename T>
__device__ __forceinline__ void quant_pack(const T* x, const float* lo, const float* scale,
                                           const long long* group_row,
                                           const long long* group_len,
                                           const long long* group_off, long long G, long long F,
                                           int bits, int feature, int stochastic,
                                           unsigned long long base, const long long* row_keys,
                                           unsigned char* codes) {
    const int per = 8 / bits;
    const float fq = (float)((1 << bits) - 1);
    const unsigned long long W = (unsigned long long)((F + 3) / 4);
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < G * F; t += step) {
        const long long g = t / F;
        const long long m = t - g * F;
        const long long r0 = group_row[g];
        const long long nr = group_len[g];
        unsigned acc = 0;
        if (feature) {
            if (m * per >= nr * F) continue;                 // past a short group's bytes
            for (int s = 0; s < per; ++s) {
                const long long j = m * per + s;
                const long long k = j / F;
                if (k >= nr) break;                          // the segment's last byte
                acc |= qc_code(x, lo, scale, r0 + k, j - k * F, F, fq, stochastic, W, base,
                               row_keys) << ((per - 1 - s) * bits);
            }
        } else {
            for (long long k = 0; k < nr; ++k)
                acc |= qc_code(x, lo, scale, r0 + k, m, F, fq, stochastic, W, base, row_keys)
                       << ((per - 1 - (int)k) * bits);
        }
        codes[group_off[g] + m] = (unsigned char)acc;
    }
}

// Thread per code byte slot, as quant_pack: out[i, c] = q * S + Z (float32 multiply, then add).
template <typename T>
__device__ __forceinline__ void quant_unpack(const unsigned char* codes, const float* lo,
                                             const float* scale, const long long* group_row,
                                             const long long* group_len,
                                             const long long* group_off, long long G,
                                             long long F, int bits, int feature, T* out) {
    const int per = 8 / bits;
    const unsigned mask = (1u << bits) - 1u;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < G * F; t += step) {
        const long long g = t / F;
        const long long m = t - g * F;
        const long long r0 = group_row[g];
        const long long nr = group_len[g];
        if (feature && m * per >= nr * F) continue;
        const unsigned b = codes[group_off[g] + m];
        if (feature) {
            for (int s = 0; s < per; ++s) {
                const long long j = m * per + s;
                const long long k = j / F;
                if (k >= nr) break;
                const long long i = r0 + k;
                const unsigned q = (b >> ((per - 1 - s) * bits)) & mask;
                out[i * F + (j - k * F)] = (T)qc_add(qc_mul((float)q, scale[i]), lo[i]);
            }
        } else {
            for (long long k = 0; k < nr; ++k) {
                const long long i = r0 + k;
                const unsigned q = (b >> ((per - 1 - (int)k) * bits)) & mask;
                out[i * F + m] = (T)qc_add(qc_mul((float)q, scale[i]), lo[i]);
            }
        }
    }
}

#endif
