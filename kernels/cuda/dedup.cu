// Per-minibatch de-duplication in first-appearance order (the GraphSAGE
// unique frontier; semantics: Backend.first_appearance, CPU version
// kernels/numba/dedup.py), fully parallel and deterministic:
//
// 1. dedup_insert: a thread per item (the minibatches' items concatenated,
//    minibatch-major, each minibatch's a-items then b-items) inserts its
//    vertex into its minibatch's hash table (hashtab.cuh, 2x the minibatch's
//    items slots) and lowers the slot's "first position" to its own position
//    with an atomic minimum;
// 2. dedup_first: a thread per item finds its vertex's slot and reads the
//    first position of that vertex in the minibatch.
// The caller then numbers columns with one prefix sum over "position ==
// first position" flags: first appearances, in item order, minibatches one
// after the other, exactly the CPU kernels' numbering.  Atomics only decide
// slots and minima, so the result does not depend on scheduling.
#include "hashtab.cuh"

// *p = min(*p, v); every access atomic (the read too, for the host build's TSan)
__device__ __forceinline__ void dedup_atomic_min(unsigned long long* p, unsigned long long v) {
    unsigned long long cur = atomicAdd(p, 0ULL);
    while (v < cur) {
        const unsigned long long prev = atomicCAS(p, cur, v);
        if (prev == cur) break;
        cur = prev;
    }
}

// keys all HASH_EMPTY and first all ~0 on entry; minibatch b owns slots
// table_ptr[b]..table_ptr[b+1]; an item whose table is full (cannot happen
// with tables of 2x the minibatch's items) leaves its first position unset.
extern "C" __global__ void dedup_insert(const long long* items, const long long* mb_of,
                                        long long nitems, const long long* table_ptr,
                                        unsigned long long* keys, unsigned long long* first) {
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < nitems; p += step) {
        const long long b = mb_of[p];
        const long long t0 = table_ptr[b];
        bool ins;
        const long long s = hash_insert(keys + t0, table_ptr[b + 1] - t0,
                                        (unsigned long long)items[p], &ins);
        if (s >= 0) dedup_atomic_min(&first[t0 + s], (unsigned long long)p);
    }
}

// first_of[p] = position of item p's vertex's first appearance in its minibatch (-1: not found)
extern "C" __global__ void dedup_first(const long long* items, const long long* mb_of,
                                       long long nitems, const long long* table_ptr,
                                       const unsigned long long* keys,
                                       const unsigned long long* first, long long* first_of) {
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long p = (long long)blockIdx.x * blockDim.x + threadIdx.x; p < nitems; p += step) {
        const long long b = mb_of[p];
        const long long t0 = table_ptr[b];
        const long long s = hash_find(keys + t0, table_ptr[b + 1] - t0,
                                      (unsigned long long)items[p]);
        first_of[p] = s >= 0 ? (long long)first[t0 + s] : -1;
    }
}
