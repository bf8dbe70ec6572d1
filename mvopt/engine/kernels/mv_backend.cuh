// Backend macros: the same kernel sources compile for the CPU (host C++ compiler, optional
// OpenMP) and for NVIDIA GPUs (NVRTC through CuPy). Exactly one backend must be selected.
#pragma once
#if defined(MV_BACKEND_CUDA)
  #define MV_DEV __device__ inline
  #define MV_COLD __device__ __noinline__   // rarely called: kept out of the callers' registers
  #define MV_GLOBAL extern "C" __global__
  // grid-stride loop: every thread of the grid takes rows i, i + stride, ...
  #define MV_FOR(i, n) for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
                            i += (int64_t)gridDim.x * blockDim.x)
  // NVRTC has no <stdint.h>; macros (not typedefs) cannot clash with a header's own typedefs
  #define int64_t long long
  #define uint64_t unsigned long long
  #define int32_t int
  #define int16_t short
  #define int8_t signed char
  #define uint32_t unsigned int
  // A value another thread may write in the same phase (a remote task's finish time): read and
  // written whole, never from a stale cache line (volatile: not cached in L1).
  #define MV_LOAD_SHARED(x) (*(volatile int64_t*)&(x))
  #define MV_STORE_SHARED(x, v) (*(volatile int64_t*)&(x) = (v))
  // Orders this thread's earlier writes before its later ones for every other thread (release)
  // and, after a load that saw another thread's release, its later reads after it (acquire).
  #define MV_FENCE() __threadfence()
  // A spin lock (the push-with-locks ablation only, MV_PUSH_LOCK; the model itself takes none)
  __device__ inline void mv_lock(int* l) { while (atomicCAS(l, 0, 1) != 0) {} __threadfence(); }
  __device__ inline void mv_unlock(int* l) { __threadfence(); atomicExch(l, 0); }
  // An add that returns the old value: atomic where a switch's ports may run at once on
  // different threads (the switch lanes), plain on the CPU, where they run one after the other.
  __device__ inline int64_t mv_add_old(int64_t* a, int64_t x) {
    return (int64_t)atomicAdd((unsigned long long*)a, (unsigned long long)x);
  }
  // The one form of the step that differs between the builds (results identical): the switch
  // lanes of a switch of at most this many ports keep their per-in-ring and per-port state in
  // registers, every loop over them unrolled (switch_lane_scan, switch_port_lane: a GPU keeps
  // an array indexed at run time in local memory, a load more per event). The CPU keeps them in
  // arrays, which its L1 holds: the unrolled selects cost it instructions and time
  // (docs/decisions/0025-small-switch-registers-gpu-only.md).
  #define MV_SMALL_SWITCH_PORTS 4
#elif defined(MV_BACKEND_CPU)
  #include <stdint.h>
  #include <string.h>
  #define MV_DEV static inline
  #define MV_COLD static __attribute__((noinline, cold))   // rarely called: kept out of hot loops
  #define MV_GLOBAL extern "C"
  #ifdef _OPENMP
    static int mv_nthreads = 1;   // set per run by mv_run: small batches do not pay for a big team
  #endif
  #define MV_LOAD_SHARED(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
  #define MV_STORE_SHARED(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)
  #define MV_FENCE() __atomic_signal_fence(__ATOMIC_SEQ_CST)   // phases end at loop ends: order for the compiler only
  static inline void mv_lock(int32_t* l) {
    for (;;) { int32_t z = 0; if (__atomic_compare_exchange_n(l, &z, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return; }
  }
  static inline void mv_unlock(int32_t* l) { __atomic_store_n(l, 0, __ATOMIC_RELEASE); }
  static inline int64_t mv_add_old(int64_t* a, int64_t x) { int64_t o = *a; *a = o + x; return o; }
  #define MV_SMALL_SWITCH_PORTS 0   // (the GPU's 4 above)
#else
  #error "define MV_BACKEND_CPU or MV_BACKEND_CUDA before including the mvopt kernels"
#endif

// A parameter column (schema.py: written once by the batch builder, never by a kernel): indexing
// gives a value, so a kernel that tried to write one would not compile. On a GPU the load takes
// the read-only data path (__ldg): it cannot alias any store, so the compiler may issue it
// before earlier stores and overlap it with other loads (the kernels wait on chains of loads).
template <class T> struct MvRo {
  const T* p;
#if defined(MV_BACKEND_CUDA)
  __device__ __forceinline__ T operator[](int64_t i) const { return __ldg(p + i); }
#else
  inline T operator[](int64_t i) const { return p[i]; }
#endif
};
