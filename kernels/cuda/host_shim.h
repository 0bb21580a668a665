// Host build of the CUDA sources (tests only): maps the subset of CUDA C++ the
// kernels use onto C++20 and OS threads, so that the very same .cu text runs on
// a CPU under ThreadSanitizer / AddressSanitizer.  Not used on a GPU.
//
// Model: one launch = blockDim OS threads created once; they walk the grid's
// blocks one after another with a block barrier between blocks, so __shared__
// variables can be function statics (one block lives at a time).  Races
// between blocks are therefore invisible here: kernels keep one writer per
// output or use atomics.  __syncthreads and __syncwarp are mutex/condition
// variable barriers (ThreadSanitizer models pthread primitives exactly);
// shuffles exchange through a per-warp slot array between two warp barriers
// (full warps, full masks only).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};

namespace spgnn_host {

class Barrier {
  public:
    void reset(unsigned n) { n_ = n; count_ = 0; gen_ = 0; }
    void wait() {
        std::unique_lock<std::mutex> lock(mu_);
        const unsigned long gen = gen_;
        if (++count_ == n_) {
            count_ = 0;
            ++gen_;
            cv_.notify_all();
        } else {
            cv_.wait(lock, [&] { return gen_ != gen; });
        }
    }
  private:
    std::mutex mu_;
    std::condition_variable cv_;
    unsigned n_ = 0, count_ = 0;
    unsigned long gen_ = 0;
};

struct Launch {
    dim3 grid, block;
    Barrier block_barrier;
    std::vector<Barrier> warp_barriers;
    std::vector<unsigned long long> slots;  // one shuffle slot per thread
};

inline Launch* current = nullptr;       // one launch at a time (the loader serialises)
inline thread_local dim3 tl_thread, tl_block;
inline thread_local unsigned tl_linear = 0;

}  // namespace spgnn_host

#define threadIdx (spgnn_host::tl_thread)
#define blockIdx (spgnn_host::tl_block)
#define blockDim (spgnn_host::current->block)
#define gridDim (spgnn_host::current->grid)

inline void __syncthreads() { spgnn_host::current->block_barrier.wait(); }

inline void __syncwarp(unsigned mask = 0xffffffffu) {
    (void)mask;
    spgnn_host::current->warp_barriers[spgnn_host::tl_linear / 32].wait();
}

template <typename T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask) {
    static_assert(sizeof(T) <= 8, "shuffle of a type wider than 8 bytes");
    auto* L = spgnn_host::current;
    const unsigned me = spgnn_host::tl_linear;
    unsigned long long bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    L->slots[me] = bits;
    __syncwarp(mask);
    const unsigned other = (me & ~31u) | ((me & 31u) ^ (unsigned)lane_mask);
    bits = L->slots[other];
    __syncwarp(mask);
    T out;
    std::memcpy(&out, &bits, sizeof(T));
    return out;
}

template <typename T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta) {
    auto* L = spgnn_host::current;
    const unsigned me = spgnn_host::tl_linear;
    unsigned long long bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    L->slots[me] = bits;
    __syncwarp(mask);
    const unsigned lane = me & 31u;
    if (lane + delta < 32) bits = L->slots[me + delta];
    else std::memcpy(&bits, &v, sizeof(T));
    __syncwarp(mask);
    T out;
    std::memcpy(&out, &bits, sizeof(T));
    return out;
}

template <typename T>
inline T atomicAdd(T* p, T v) { return std::atomic_ref<T>(*p).fetch_add(v); }

template <typename T>
inline T atomicCAS(T* p, T expected, T desired) {
    std::atomic_ref<T>(*p).compare_exchange_strong(expected, desired);
    return expected;
}

namespace spgnn_host {

// Runs body() as every thread of every block of the grid.
template <typename F>
void launch(dim3 grid, dim3 block, F body) {
    Launch L;
    L.grid = grid;
    L.block = block;
    const unsigned n = block.x * block.y * block.z;
    if (n == 0 || grid.x * grid.y * grid.z == 0) return;
    L.block_barrier.reset(n);
    L.warp_barriers = std::vector<Barrier>((n + 31) / 32);
    for (unsigned w = 0; w < L.warp_barriers.size(); ++w) {
        const unsigned left = n - 32 * w;
        L.warp_barriers[w].reset(left < 32 ? left : 32);
    }
    L.slots.assign(n, 0);
    current = &L;
    std::vector<std::thread> threads;
    threads.reserve(n);
    for (unsigned t = 0; t < n; ++t) {
        threads.emplace_back([&, t] {
            tl_linear = t;
            tl_thread = dim3{t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
            for (unsigned bz = 0; bz < grid.z; ++bz)
                for (unsigned by = 0; by < grid.y; ++by)
                    for (unsigned bx = 0; bx < grid.x; ++bx) {
                        tl_block = dim3{bx, by, bz};
                        body();
                        L.block_barrier.wait();  // the block is done before the next reuses __shared__
                    }
        });
    }
    for (auto& th : threads) th.join();
    current = nullptr;
}

}  // namespace spgnn_host
