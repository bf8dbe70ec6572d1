/* The ThreadSanitizer entry points an instrumented build of the CPU kernels calls at every load
 * and store (g++ -fsanitize=thread -c), implemented here to record the addresses instead of
 * checking races: experiments/diag_l1_trace.py links this in place of libtsan. Atomics are done
 * for real (the kernels' results must not change); one thread only. */
#include <stddef.h>
#include <stdint.h>

static uint64_t *buf;            /* accessed addresses; bit 63: a store */
static uint64_t cap, n;
static int on;

void trace_begin(uint64_t *b, uint64_t c) { buf = b; cap = c; n = 0; on = 1; }
/* the start of node v's window (the kernels' MV_TRACE_NODE hook): a record of its own, bit 62 */
void trace_node(int64_t v) { if (on && n < cap) buf[n++] = (uint64_t)v | (1ull << 62); }
uint64_t trace_end(void) { on = 0; return n; }

static inline void rec(const void *a, uint64_t store) {
  if (on && n < cap) buf[n++] = (uint64_t)(uintptr_t)a | (store << 63);
}
void __tsan_init(void) {}
void __tsan_func_entry(void *pc) { (void)pc; }
void __tsan_func_exit(void) {}
void __tsan_read1(void *a) { rec(a, 0); }
void __tsan_read2(void *a) { rec(a, 0); }
void __tsan_read4(void *a) { rec(a, 0); }
void __tsan_read8(void *a) { rec(a, 0); }
void __tsan_read16(void *a) { rec(a, 0); }
void __tsan_write1(void *a) { rec(a, 1); }
void __tsan_write2(void *a) { rec(a, 1); }
void __tsan_write4(void *a) { rec(a, 1); }
void __tsan_write8(void *a) { rec(a, 1); }
void __tsan_write16(void *a) { rec(a, 1); }
void __tsan_read_range(void *a, size_t size) { for (size_t i = 0; i < size; i += 8) rec((char *)a + i, 0); }
void __tsan_write_range(void *a, size_t size) { for (size_t i = 0; i < size; i += 8) rec((char *)a + i, 1); }
int64_t __tsan_atomic64_load(const volatile int64_t *a, int mo) { (void)mo; rec((const void *)a, 0); return *a; }
void __tsan_atomic64_store(volatile int64_t *a, int64_t v, int mo) { (void)mo; rec((const void *)a, 1); *a = v; }
void __tsan_atomic_signal_fence(int mo) { (void)mo; }
