// Entry points of the message codec (templated bodies and semantics: quant.cuh).
// Indices (group rows, row keys) are always int64; one entry point per value type.
#include "quant.cuh"

extern "C" __global__ void quant_params_f32(const float* x, long long n, long long F, int bits,
                                            int bf16, float* out_lo, float* out_scale,
                                            int* out_bad) {
    quant_params<float>(x, n, F, bits, bf16, out_lo, out_scale, out_bad);
}

extern "C" __global__ void quant_params_f64(const double* x, long long n, long long F, int bits,
                                            int bf16, float* out_lo, float* out_scale,
                                            int* out_bad) {
    quant_params<double>(x, n, F, bits, bf16, out_lo, out_scale, out_bad);
}

extern "C" __global__ void quant_pack_f32(const float* x, const float* lo, const float* scale,
                                          const long long* group_row, const long long* group_len,
                                          const long long* group_off, long long G, long long F,
                                          int bits, int feature, int stochastic,
                                          unsigned long long base, const long long* row_keys,
                                          unsigned char* codes) {
    quant_pack<float>(x, lo, scale, group_row, group_len, group_off, G, F, bits, feature,
                      stochastic, base, row_keys, codes);
}

extern "C" __global__ void quant_pack_f64(const double* x, const float* lo, const float* scale,
                                          const long long* group_row, const long long* group_len,
                                          const long long* group_off, long long G, long long F,
                                          int bits, int feature, int stochastic,
                                          unsigned long long base, const long long* row_keys,
                                          unsigned char* codes) {
    quant_pack<double>(x, lo, scale, group_row, group_len, group_off, G, F, bits, feature,
                      stochastic, base, row_keys, codes);
}

extern "C" __global__ void quant_unpack_f32(const unsigned char* codes, const float* lo,
                                            const float* scale, const long long* group_row,
                                            const long long* group_len,
                                            const long long* group_off, long long G,
                                            long long F, int bits, int feature, float* out) {
    quant_unpack<float>(codes, lo, scale, group_row, group_len, group_off, G, F, bits, feature,
                      out);
}

extern "C" __global__ void quant_unpack_f64(const unsigned char* codes, const float* lo,
                                            const float* scale, const long long* group_row,
                                            const long long* group_len,
                                            const long long* group_off, long long G,
                                            long long F, int bits, int feature, double* out) {
    quant_unpack<double>(codes, lo, scale, group_row, group_len, group_off, G, F, bits, feature,
                      out);
}
