// Row extraction  B = A[rows, :]  (any order, repeats allowed, as scipy).
// The caller computes B's indptr (prefix sum of the selected rows' lengths);
// a warp copies one output row, lanes striding over its entries (coalesced
// reads and writes).  One writer per output entry.
template <typename I, typename T>
__device__ __forceinline__ void extract_rows_body(const I* indptr, const I* indices, const T* data,
                                                  const long long* rows, long long nrows,
                                                  const long long* out_indptr, I* out_indices,
                                                  T* out_data) {
    const int lane = threadIdx.x & 31;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long r = (((long long)blockIdx.x * blockDim.x) >> 5) + (threadIdx.x >> 5); r < nrows;
         r += warps) {
        const long long src = (long long)indptr[rows[r]];
        const long long len = (long long)out_indptr[r + 1] - out_indptr[r];
        const long long dst = out_indptr[r];
        for (long long t = lane; t < len; t += 32) {
            out_indices[dst + t] = indices[src + t];
            out_data[dst + t] = data[src + t];
        }
    }
}

extern "C" __global__ void extract_rows_i32_f32(const int* indptr, const int* indices,
        const float* data, const long long* rows, long long nrows, const long long* out_indptr,
        int* out_indices, float* out_data) {
    extract_rows_body<int, float>(indptr, indices, data, rows, nrows, out_indptr, out_indices,
                                out_data);
}

extern "C" __global__ void extract_rows_i32_f64(const int* indptr, const int* indices,
        const double* data, const long long* rows, long long nrows, const long long* out_indptr,
        int* out_indices, double* out_data) {
    extract_rows_body<int, double>(indptr, indices, data, rows, nrows, out_indptr, out_indices,
                                out_data);
}

extern "C" __global__ void extract_rows_i64_f32(const long long* indptr, const long long* indices,
        const float* data, const long long* rows, long long nrows, const long long* out_indptr,
        long long* out_indices, float* out_data) {
    extract_rows_body<long long, float>(indptr, indices, data, rows, nrows, out_indptr, out_indices,
                                out_data);
}

extern "C" __global__ void extract_rows_i64_f64(const long long* indptr, const long long* indices,
        const double* data, const long long* rows, long long nrows, const long long* out_indptr,
        long long* out_indices, double* out_data) {
    extract_rows_body<long long, double>(indptr, indices, data, rows, nrows, out_indptr, out_indices,
                                out_data);
}
