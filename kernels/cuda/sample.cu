// Keyed sampling without replacement, a port of kernels/numba/sample.py that
// gives the same positions bit for bit (a thread per output row; every random
// number is a pure function of the row's key and an integer, so the thread
// that runs a row does not matter), and the per-row sort of sampled blocks.
//
// Same arithmetic as the Numba kernels, in the same order: SplitMix64's
// finaliser on uint64 (wrapping), hash_uniform = ((h >> 11) + 0.5) * 2^-53,
// Floyd's integer draws, Efraimidis-Spirakis keys log(u) / w (u) compared
// with the same tie rules, successive inverse transform with running float64
// sums.  No expression here has the a * b + c shape a GPU compiler contracts
// into an FMA.  The one operation whose last bit may differ on a GPU is
// log() (CUDA documents 1 ulp): weighted ES keys within 1 ulp of each other
// could then order differently (docs/gpu.md).
//
// Operands are int64 positions/ids and float64 weights, as the CPU backends
// use them (spgnn/backends/_host_kernels.py casts the same way).
#include "splitmix.cuh"
#ifndef __CUDACC_RTC__
#include <cmath>  // host build only: NVRTC has log() built in
#endif

#define SAMPLE_FLOYD 0
#define SAMPLE_ES 1
#define SAMPLE_ITS 2

__device__ __forceinline__ unsigned long long sample_hash2(unsigned long long key, long long x) {
    return spgnn_mix64(key ^ spgnn_mix64(((unsigned long long)x + 1ULL) * SPGNN_GOLDEN));
}

// a uniform double in (0, 1), 53 bits, never 0 or 1
__device__ __forceinline__ double sample_uniform(unsigned long long key, long long x) {
    return ((double)(sample_hash2(key, x) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

__device__ __forceinline__ void sample_sort_small(long long* a, long long lo, long long hi) {
    for (long long q = lo + 1; q < hi; ++q) {
        const long long v = a[q];
        long long t = q - 1;
        while (t >= lo && a[t] > v) {
            a[t + 1] = a[t];
            --t;
        }
        a[t + 1] = v;
    }
}

// uniform s-subset of range(m) (m > s) into out[o:o+s], sorted
__device__ __forceinline__ void sample_floyd(unsigned long long key, long long m, long long s,
                                             long long* out, long long o) {
    long long cnt = 0;
    for (long long j = m - s; j < m; ++j) {
        long long t = (long long)(sample_uniform(key, j) * (double)(j + 1));
        if (t > j) t = j;
        bool found = false;
        for (long long q = 0; q < cnt; ++q) {
            if (out[o + q] == t) {
                found = true;
                break;
            }
        }
        out[o + cnt] = found ? j : t;
        ++cnt;
    }
    sample_sort_small(out, o, o + s);
}

// top-s Efraimidis-Spirakis keys of entries lo..hi into out[o:o+s]; kbuf holds >= s doubles
__device__ __forceinline__ void sample_es(const long long* indices, const double* data,
                                          long long lo, long long hi, unsigned long long key,
                                          long long s, int weighted, double* kbuf, long long* out,
                                          long long o) {
    long long cnt = 0;
    for (long long e = lo; e < hi; ++e) {
        double k;
        if (weighted) {
            const double w = data[e];
            if (!(w > 0)) continue;
            k = log(sample_uniform(key, indices[e])) / w;
        } else {
            k = sample_uniform(key, indices[e]);
        }
        if (cnt == s && !(k > kbuf[s - 1])) continue;
        long long t = cnt < s ? cnt - 1 : s - 2;
        while (t >= 0 && kbuf[t] < k) {
            kbuf[t + 1] = kbuf[t];
            out[o + t + 1] = out[o + t];
            --t;
        }
        kbuf[t + 1] = k;
        out[o + t + 1] = e - lo;
        if (cnt < s) ++cnt;
    }
    sample_sort_small(out, o, o + cnt);
}

// successive inverse transform sampling of s entries of lo..hi; wbuf holds >= hi - lo doubles
__device__ __forceinline__ void sample_its(const double* data, long long lo, long long hi,
                                           unsigned long long key, long long s, int weighted,
                                           double* wbuf, long long* out, long long o) {
    const long long m = hi - lo;
    for (long long q = 0; q < m; ++q) {
        if (weighted) {
            const double w = data[lo + q];
            wbuf[q] = w > 0 ? w : 0.0;
        } else {
            wbuf[q] = 1.0;
        }
    }
    for (long long j = 0; j < s; ++j) {
        double total = 0.0;
        long long last = -1;
        for (long long q = 0; q < m; ++q) {
            if (wbuf[q] > 0) {
                total += wbuf[q];
                last = q;
            }
        }
        const double target = sample_uniform(key, j) * total;
        double acc = 0.0;
        long long pick = last;  // clamp: rounding can leave target >= acc
        for (long long q = 0; q < m; ++q) {
            if (wbuf[q] > 0) {
                acc += wbuf[q];
                if (acc > target) {  // upper bound: zero weights never win
                    pick = q;
                    break;
                }
            }
        }
        wbuf[pick] = 0.0;
        out[o + j] = pick;
    }
    sample_sort_small(out, o, o + s);
}

// counts[r] = min(s, m+) of CSR row rows[r] (m+: entries with data > 0 when weighted)
extern "C" __global__ void sample_counts(const long long* indptr, const double* data,
                                         const long long* rows, long long nrows, long long s,
                                         int weighted, long long* counts) {
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < nrows; r += step) {
        const long long i = rows[r];
        long long m = indptr[i + 1] - indptr[i];
        if (weighted) {
            m = 0;
            for (long long e = indptr[i]; e < indptr[i + 1]; ++e) m += data[e] > 0 ? 1 : 0;
        }
        counts[r] = m < s ? m : s;
    }
}

// out_pos[out_indptr[r]:out_indptr[r+1]] = the sampled positions of row rows[r]
// (absolute, increasing).  Row r's scratch is scratch[scratch_ptr[r]:scratch_ptr[r+1]]:
// at least the row's count doubles for ES, its length for ITS.
extern "C" __global__ void sample_fill(const long long* indptr, const long long* indices,
                                       const double* data, const long long* rows,
                                       const unsigned long long* keys, long long nrows,
                                       int method, int weighted, const long long* out_indptr,
                                       const long long* scratch_ptr, double* scratch,
                                       long long* out_pos) {
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < nrows; r += step) {
        const long long i = rows[r];
        const long long lo = indptr[i];
        const long long hi = indptr[i + 1];
        const long long o = out_indptr[r];
        const long long cnt = out_indptr[r + 1] - o;
        if (cnt == 0) continue;
        long long mpos = hi - lo;
        if (weighted) {
            mpos = 0;
            for (long long e = lo; e < hi; ++e) mpos += data[e] > 0 ? 1 : 0;
        }
        if (mpos <= cnt) {  // take every eligible entry
            long long q = 0;
            for (long long e = lo; e < hi; ++e) {
                if (!weighted || data[e] > 0) {
                    out_pos[o + q] = e;
                    ++q;
                }
            }
            continue;
        }
        const unsigned long long key = keys[r];
        double* buf = scratch + scratch_ptr[r];
        if (method == SAMPLE_FLOYD) {
            sample_floyd(key, hi - lo, cnt, out_pos, o);
        } else if (method == SAMPLE_ES) {
            sample_es(indices, data, lo, hi, key, cnt, weighted, buf, out_pos, o);
        } else {
            sample_its(data, lo, hi, key, cnt, weighted, buf, out_pos, o);
        }
        for (long long q = 0; q < cnt; ++q) out_pos[o + q] += lo;
    }
}

// Sort each CSR row's (cols, vals) by column in place, a thread per row (rows
// of a sampled block hold at most s entries; columns distinct per row).
template <typename I, typename T>
__device__ __forceinline__ void sort_rows_body(const long long* indptr, long long nrows, I* cols,
                                               T* vals) {
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < nrows; r += step) {
        const long long lo = indptr[r];
        const long long hi = indptr[r + 1];
        for (long long e = lo + 1; e < hi; ++e) {
            const I c = cols[e];
            const T x = vals[e];
            long long q = e - 1;
            while (q >= lo && cols[q] > c) {
                cols[q + 1] = cols[q];
                vals[q + 1] = vals[q];
                --q;
            }
            cols[q + 1] = c;
            vals[q + 1] = x;
        }
    }
}

extern "C" __global__ void sort_rows_i32_f32(const long long* indptr, long long nrows,
                                             int* cols, float* vals) {
    sort_rows_body<int, float>(indptr, nrows, cols, vals);
}

extern "C" __global__ void sort_rows_i32_f64(const long long* indptr, long long nrows,
                                             int* cols, double* vals) {
    sort_rows_body<int, double>(indptr, nrows, cols, vals);
}

extern "C" __global__ void sort_rows_i64_f32(const long long* indptr, long long nrows,
                                             long long* cols, float* vals) {
    sort_rows_body<long long, float>(indptr, nrows, cols, vals);
}

extern "C" __global__ void sort_rows_i64_f64(const long long* indptr, long long nrows,
                                             long long* cols, double* vals) {
    sort_rows_body<long long, double>(indptr, nrows, cols, vals);
}
