// SpGEMM  C = A (+).(x) B  on CSR A (m x k) and CSR B (k x n), two passes, any semiring.
//
// Design: hash SpGEMM after Nagasaka, Nukada, Matsuoka, "High-performance and
// memory-saving sparse general matrix-matrix multiplication for NVIDIA Pascal
// GPU" (ICPP 2017): Gustavson's row-by-row product, a symbolic pass that
// counts each output row's distinct columns in a per-row open-addressing hash
// table (keys inserted with atomicCAS), then a numeric pass that inserts the
// same keys into a table sized by the count and reduces the values there.
// Why this design and not ESC (expand-sort-compress, Bell/Dalton/Olson): ESC
// materialises every scalar product (memory ~ flops), the hash tables only
// ~2x the distinct columns per row (numeric) and min(flops, n) (symbolic);
// and GNN products (sampling, aggregation) have few products per row, where
// a warp per row with a small table is the paper's fast case.
// Departures from the paper, and why:
// * tables live in global memory, one slot range per row (offsets
//   table_ptr[] computed by the caller on the array module): no shared-memory
//   capacity limit, no row grouping by size (a next step for big rows);
// * values are reduced in STORAGE ORDER, deterministically, without float
//   atomics: the 32 lanes of a warp take 32 consecutive entries of one row of
//   B, insert their keys, and the lowest lane of each group of equal slots
//   (the group's "leader") folds the group's terms in lane order into the
//   slot.  So results do not depend on scheduling and equal the Numba
//   kernel's up to FMA contraction (exactly, for min/max/first/second/pair);
// * the numeric pass writes each row's (column, value) pairs in table order;
//   the caller sorts every row by column with one array-module sort (CUB
//   radix sort on a GPU), which makes the output canonical.
// The symbolic count is structural (GraphBLAS: a column is present whenever
// some term exists, whatever its value), as in kernels/numba/spgemm.py.
#include "ops.cuh"
#include "hashtab.cuh"

// warps per block = blockDim.x / 32, chosen by the caller (at most SPGEMM_MAX_WARPS)
#define SPGEMM_MAX_WARPS 8
#define SPGEMM_EMPTY HASH_EMPTY
// added to a row's count when its table overflowed (an indptr that is not
// the symbolic product's): the caller then sees a mismatch and raises
#define SPGEMM_OVERFLOW 0x10000000000ULL

// Symbolic pass: counts[i] = distinct columns of output row i.  keys[] is
// all SPGEMM_EMPTY on entry; row i owns keys[table_ptr[i]:table_ptr[i+1]].
template <typename I>
__device__ __forceinline__ void spgemm_count_rows(const I* a_indptr, const I* a_indices,
                                                  const I* b_indptr, const I* b_indices,
                                                  long long m, const long long* table_ptr,
                                                  unsigned long long* keys, long long* counts) {
    const int lane = threadIdx.x & 31;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long row = (((long long)blockIdx.x * blockDim.x) >> 5) + (threadIdx.x >> 5); row < m;
         row += warps) {
        const long long t0 = table_ptr[row];
        const long long size = table_ptr[row + 1] - t0;
        long long mine = 0;
        for (long long ea = a_indptr[row]; ea < (long long)a_indptr[row + 1]; ++ea) {
            const long long k = a_indices[ea];
            for (long long eb = (long long)b_indptr[k] + lane; eb < (long long)b_indptr[k + 1];
                 eb += 32) {
                bool ins;
                hash_insert(keys + t0, size, (unsigned long long)(long long)b_indices[eb], &ins);
                mine += ins ? 1 : 0;
            }
        }
        for (int s = 16; s > 0; s >>= 1) mine += __shfl_xor_sync(0xffffffffu, mine, s);
        if (lane == 0) counts[row] = mine;
    }
}

// Numeric pass: row i's distinct columns and reduced values go, in table
// order, to out[out_indptr[i]:out_indptr[i+1]]; got[i] (zero on entry) ends
// as the number of distinct columns found (plus SPGEMM_OVERFLOW if the
// table, sized from out_indptr, overflowed).  Writes stay inside the row's
// output slot whatever out_indptr holds.
template <typename I, typename T>
__device__ __forceinline__ void spgemm_fill_rows(const I* a_indptr, const I* a_indices,
                                                 const T* a_data, const I* b_indptr,
                                                 const I* b_indices, const T* b_data, long long m,
                                                 int add, int mul, const long long* out_indptr,
                                                 const long long* table_ptr,
                                                 unsigned long long* keys, T* vals,
                                                 long long* out_indices, T* out_data,
                                                 unsigned long long* got) {
    __shared__ long long s_slot[SPGEMM_MAX_WARPS][32];
    __shared__ T s_val[SPGEMM_MAX_WARPS][32];
    __shared__ int s_new[SPGEMM_MAX_WARPS][32];
    const int lane = threadIdx.x & 31;
    const int w = threadIdx.x >> 5;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long row = (((long long)blockIdx.x * blockDim.x) >> 5) + w; row < m; row += warps) {
        const long long t0 = table_ptr[row];
        const long long size = table_ptr[row + 1] - t0;
        bool overflow = false;
        for (long long ea = a_indptr[row]; ea < (long long)a_indptr[row + 1]; ++ea) {
            const long long k = a_indices[ea];
            const T av = a_data[ea];
            const long long lo = b_indptr[k];
            const long long hi = b_indptr[k + 1];
            for (long long e0 = lo; e0 < hi; e0 += 32) {
                const long long e = e0 + lane;
                const int cnt = (hi - e0 < 32) ? (int)(hi - e0) : 32;
                long long slot = -1;
                if (lane < cnt) {
                    bool ins;
                    slot = hash_insert(keys + t0, size, (unsigned long long)(long long)b_indices[e],
                                         &ins);
                    overflow = overflow || slot < 0;
                    s_slot[w][lane] = slot;
                    s_val[w][lane] = sr_mul(mul, av, b_data[e]);
                    s_new[w][lane] = ins ? 1 : 0;
                }
                __syncwarp();  // the chunk's slots and terms are visible to every lane
                if (lane < cnt && slot >= 0) {
                    bool leader = true;
                    for (int l = 0; l < lane; ++l) leader = leader && s_slot[w][l] != slot;
                    if (leader) {
                        // the column is new in this row iff a lane of the group inserted it
                        bool fresh = false;
                        for (int l = lane; l < cnt; ++l)
                            fresh = fresh || (s_slot[w][l] == slot && s_new[w][l]);
                        T acc = fresh ? s_val[w][lane] : sr_add(add, vals[t0 + slot], s_val[w][lane]);
                        for (int l = lane + 1; l < cnt; ++l)
                            if (s_slot[w][l] == slot) acc = sr_add(add, acc, s_val[w][l]);
                        vals[t0 + slot] = acc;
                    }
                }
                __syncwarp();  // every lane is done with the chunk before it is overwritten
            }
        }
        const long long o = out_indptr[row];
        const long long len = out_indptr[row + 1] - o;
        for (long long h = lane; h < size; h += 32) {
            const unsigned long long key = keys[t0 + h];
            if (key != SPGEMM_EMPTY) {
                const long long pos = (long long)atomicAdd(&got[row], 1ULL);
                if (pos < len) {
                    out_indices[o + pos] = (long long)key;
                    out_data[o + pos] = vals[t0 + h];
                }
            }
        }
        if (overflow) atomicAdd(&got[row], SPGEMM_OVERFLOW);
    }
}

extern "C" __global__ void spgemm_count_i32(const int* a_indptr, const int* a_indices,
                                            const int* b_indptr, const int* b_indices, long long m,
                                            const long long* table_ptr, unsigned long long* keys,
                                            long long* counts) {
    spgemm_count_rows<int>(a_indptr, a_indices, b_indptr, b_indices, m, table_ptr, keys, counts);
}

extern "C" __global__ void spgemm_count_i64(const long long* a_indptr, const long long* a_indices,
                                            const long long* b_indptr, const long long* b_indices,
                                            long long m, const long long* table_ptr,
                                            unsigned long long* keys, long long* counts) {
    spgemm_count_rows<long long>(a_indptr, a_indices, b_indptr, b_indices, m, table_ptr, keys,
                                 counts);
}

extern "C" __global__ void spgemm_fill_i32_f32(const int* a_indptr, const int* a_indices,
        const float* a_data, const int* b_indptr, const int* b_indices, const float* b_data, long long m,
        int add, int mul, const long long* out_indptr, const long long* table_ptr,
        unsigned long long* keys, float* vals, long long* out_indices, float* out_data,
        unsigned long long* got) {
    spgemm_fill_rows<int, float>(a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, m, add,
                               mul, out_indptr, table_ptr, keys, vals, out_indices, out_data, got);
}

extern "C" __global__ void spgemm_fill_i32_f64(const int* a_indptr, const int* a_indices,
        const double* a_data, const int* b_indptr, const int* b_indices, const double* b_data, long long m,
        int add, int mul, const long long* out_indptr, const long long* table_ptr,
        unsigned long long* keys, double* vals, long long* out_indices, double* out_data,
        unsigned long long* got) {
    spgemm_fill_rows<int, double>(a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, m, add,
                               mul, out_indptr, table_ptr, keys, vals, out_indices, out_data, got);
}

extern "C" __global__ void spgemm_fill_i64_f32(const long long* a_indptr, const long long* a_indices,
        const float* a_data, const long long* b_indptr, const long long* b_indices, const float* b_data, long long m,
        int add, int mul, const long long* out_indptr, const long long* table_ptr,
        unsigned long long* keys, float* vals, long long* out_indices, float* out_data,
        unsigned long long* got) {
    spgemm_fill_rows<long long, float>(a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, m, add,
                               mul, out_indptr, table_ptr, keys, vals, out_indices, out_data, got);
}

extern "C" __global__ void spgemm_fill_i64_f64(const long long* a_indptr, const long long* a_indices,
        const double* a_data, const long long* b_indptr, const long long* b_indices, const double* b_data, long long m,
        int add, int mul, const long long* out_indptr, const long long* table_ptr,
        unsigned long long* keys, double* vals, long long* out_indices, double* out_data,
        unsigned long long* got) {
    spgemm_fill_rows<long long, double>(a_indptr, a_indices, a_data, b_indptr, b_indices, b_data, m, add,
                               mul, out_indptr, table_ptr, keys, vals, out_indices, out_data, got);
}
