// Open-addressing hash set of 64-bit keys (linear probing), shared by
// spgemm.cu (a table per output row) and dedup.cu (a table per minibatch).
// A table is a slot range keys[0:size] of a global array, all HASH_EMPTY
// before the first insert; every access to a key during inserts is an
// atomicCAS, so concurrent threads agree on each key's slot.
#ifndef SPGNN_HASHTAB_CUH
#define SPGNN_HASHTAB_CUH

#define HASH_EMPTY 0xFFFFFFFFFFFFFFFFULL

__device__ __forceinline__ long long hash_home(unsigned long long key, long long size) {
    const unsigned long long h = key * 0x9E3779B97F4A7C15ULL;
    return (long long)((h ^ (h >> 32)) % (unsigned long long)size);
}

// Slot of `key` (< 2^63), inserted or found; *inserted says which.  -1 when
// the table is full (or has no slot): callers size tables so that this only
// happens for inputs they then refuse.
__device__ __forceinline__ long long hash_insert(unsigned long long* keys, long long size,
                                                 unsigned long long key, bool* inserted) {
    *inserted = false;
    if (size <= 0) return -1;
    long long s = hash_home(key, size);
    for (long long probe = 0; probe < size; ++probe) {
        const unsigned long long old = atomicCAS(&keys[s], HASH_EMPTY, key);
        if (old == HASH_EMPTY) {
            *inserted = true;
            return s;
        }
        if (old == key) return s;
        s = (s + 1 == size) ? 0 : s + 1;
    }
    return -1;
}

// Slot of a key known to be present, after every insert has finished (a
// later launch): plain reads.  -1 if absent.
__device__ __forceinline__ long long hash_find(const unsigned long long* keys, long long size,
                                               unsigned long long key) {
    if (size <= 0) return -1;
    long long s = hash_home(key, size);
    for (long long probe = 0; probe < size; ++probe) {
        const unsigned long long k = keys[s];
        if (k == key) return s;
        if (k == HASH_EMPTY) return -1;
        s = (s + 1 == size) ? 0 : s + 1;
    }
    return -1;
}

#endif
