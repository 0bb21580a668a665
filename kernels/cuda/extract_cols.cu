// Column extraction  B = A[:, cols]  (any order, repeats allowed), scipy's entry order:
// each row is walked in storage order and a nonzero in column c emits one
// entry per position p with cols[p] == c, increasing p (csr_column_index2).
//
// The caller builds, on the array module, the inverse map column -> positions
// as CSR-style offsets (col_offsets[c]..col_offsets[c+1] index col_order, the
// positions of cols stably sorted by column) and B's indptr from the counts.
// Two passes, a thread per row (grid-stride), one writer per output entry:
// count, then fill at the row's offset.  Rows of a GNN block are short and
// the fill is a copy, so a thread per row keeps it simple; a warp per long
// row is the next step if profiles show imbalance.

template <typename I>
__device__ __forceinline__ void extract_cols_count_rows(const I* indptr, const I* indices,
                                                        const long long* col_offsets, long long m,
                                                        long long* counts) {
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += step) {
        long long c = 0;
        for (long long e = indptr[i]; e < (long long)indptr[i + 1]; ++e) {
            const long long j = indices[e];
            c += col_offsets[j + 1] - col_offsets[j];
        }
        counts[i] = c;
    }
}

template <typename I, typename T>
__device__ __forceinline__ void extract_cols_fill_rows(const I* indptr, const I* indices,
                                                       const T* data, const long long* col_offsets,
                                                       const long long* col_order, long long m,
                                                       const long long* out_indptr,
                                                       long long* out_indices, T* out_data) {
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < m; i += step) {
        long long dst = out_indptr[i];
        for (long long e = indptr[i]; e < (long long)indptr[i + 1]; ++e) {
            const long long j = indices[e];
            const T v = data[e];
            for (long long q = col_offsets[j]; q < col_offsets[j + 1]; ++q) {
                out_indices[dst] = col_order[q];
                out_data[dst] = v;
                ++dst;
            }
        }
    }
}

extern "C" __global__ void extract_cols_count_i32(const int* indptr, const int* indices,
        const long long* col_offsets, long long m, long long* counts) {
    extract_cols_count_rows<int>(indptr, indices, col_offsets, m, counts);
}

extern "C" __global__ void extract_cols_count_i64(const long long* indptr, const long long* indices,
        const long long* col_offsets, long long m, long long* counts) {
    extract_cols_count_rows<long long>(indptr, indices, col_offsets, m, counts);
}

extern "C" __global__ void extract_cols_fill_i32_f32(const int* indptr, const int* indices,
        const float* data, const long long* col_offsets, const long long* col_order, long long m,
        const long long* out_indptr, long long* out_indices, float* out_data) {
    extract_cols_fill_rows<int, float>(indptr, indices, data, col_offsets, col_order, m, out_indptr,
                                   out_indices, out_data);
}

extern "C" __global__ void extract_cols_fill_i32_f64(const int* indptr, const int* indices,
        const double* data, const long long* col_offsets, const long long* col_order, long long m,
        const long long* out_indptr, long long* out_indices, double* out_data) {
    extract_cols_fill_rows<int, double>(indptr, indices, data, col_offsets, col_order, m, out_indptr,
                                   out_indices, out_data);
}

extern "C" __global__ void extract_cols_fill_i64_f32(const long long* indptr, const long long* indices,
        const float* data, const long long* col_offsets, const long long* col_order, long long m,
        const long long* out_indptr, long long* out_indices, float* out_data) {
    extract_cols_fill_rows<long long, float>(indptr, indices, data, col_offsets, col_order, m, out_indptr,
                                   out_indices, out_data);
}

extern "C" __global__ void extract_cols_fill_i64_f64(const long long* indptr, const long long* indices,
        const double* data, const long long* col_offsets, const long long* col_order, long long m,
        const long long* out_indptr, long long* out_indices, double* out_data) {
    extract_cols_fill_rows<long long, double>(indptr, indices, data, col_offsets, col_order, m, out_indptr,
                                   out_indices, out_data);
}
