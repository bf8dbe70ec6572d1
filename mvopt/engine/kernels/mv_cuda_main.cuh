// GPU entry points: two ways to run the same two-phase step (kernels/mv_step.cuh), chosen by the
// host (GpuBackend: by the experiments' sizes, or by the megakernel-vs-launches ablation); both
// give identical results:
//   mv_run_groups  ("groups", the megakernel) one launch, each experiment's nodes in one block:
//                  the block's barrier separates the phases, window after window (experiments of
//                  at most MV_GROUP_THREADS nodes).
//   mv_phase_*     ("graph") one launch per phase (the launch boundary is the barrier), many
//                  windows replayed as a CUDA graph.
// Both run an experiment only while exp_iter < `cap` (the host raises the cap launch by launch,
// so that it regains control regularly).
// The column pointers live in constant memory (set by the host before a launch): every system
// reads them through the constant cache, and the compiler may keep them in registers across
// stores, since nothing the kernels write can alias constant memory.
__constant__ Ctx mv_ctx;

// MV_THREADS (the graph kernels' block) and MV_GROUP_THREADS (the groups kernel's largest block)
// come from the host's table of backend defaults (mvopt/engine/backend_defaults.py).
#if !defined(MV_THREADS) || !defined(MV_GROUP_THREADS)
#error "the GPU backend defines MV_THREADS and MV_GROUP_THREADS (mvopt/engine/backend_defaults.py)"
#endif
// The graph mode's window kernel fits 4 blocks per SM in 128 registers without spills (the
// parameter columns are read-only, MvRo); the bound keeps it there.
#define MV_WINDOW_MIN_BLOCKS 4

MV_DEV bool exp_active(const Ctx* c, int64_t e, int64_t cap) {
  return c->exp_status[e] == ST_RUN && c->exp_iter[e] < cap;
}

// Node v's window, then its report to experiment e: the minimum of the next-event and progress
// times and the tasks and flows it finished (integer minima and sums: the order in which the
// nodes report cannot change the result).
// `acc`: the experiment's four accumulators (next, prog, done, acked), in global or shared memory.
// (A report of MV_INF, e.g. a quiet switch's, changes nothing: no atomic.) `lanes`: whether a
// switch's window may run port by port on this thread (the CPU's way); on the GPU only the
// groups kernel runs windows port by port, on its free threads, and the graph kernel keeps the
// serial loop.
// KIND: what v is known to be (node_window's).
template <int KIND = NODE_ANY>
MV_DEV void node_window_into(Ctx* c, int64_t v, int64_t* next_acc, int64_t* prog_acc, int64_t* done_acc,
                             int64_t* acked_acc, bool lanes = false) {
  int32_t done0 = c->node_tasks_done[v], acked0 = c->node_flows_acked[v];
  node_window<KIND>(c, v, lanes);
  int64_t next = c->node_next_ps[v], prog = c->node_prog_ps[v];
  if (next < MV_INF) atomicMin(next_acc, next);
  if (prog < MV_INF) atomicMin(prog_acc, prog);
  int32_t done = c->node_tasks_done[v] - done0, acked = c->node_flows_acked[v] - acked0;
  if (done) atomicAdd((unsigned long long*)done_acc, (unsigned long long)done);
  if (acked) atomicAdd((unsigned long long*)acked_acc, (unsigned long long)acked);
  c->node_iter[v] += 1;
}
MV_DEV void node_window_report(Ctx* c, int64_t v, int64_t e) {
  node_window_into(c, v, &c->exp_acc_next[e], &c->exp_acc_prog[e], &c->exp_done[e], &c->exp_acked[e]);
}

// Phase 2 from the nodes' reports, which it clears for the next window.
MV_DEV void advance_reported(Ctx* c, int64_t e) {
  int64_t next = MV_LOAD_SHARED(c->exp_acc_next[e]), prog = MV_LOAD_SHARED(c->exp_acc_prog[e]);
  int64_t done = MV_LOAD_SHARED(c->exp_done[e]), acked = MV_LOAD_SHARED(c->exp_acked[e]);
  c->exp_acc_next[e] = MV_INF;
  c->exp_acc_prog[e] = MV_INF;
  advance_with(c, e, next, prog, done, acked);   // publishes exp_iter last, after a fence
}

MV_DEV int64_t mv_clock_ns() {
  int64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// "groups": every experiment's nodes in one block, groups of consecutive experiments
// (group_exp[g] .. group_exp[g + 1]; the host packs them, at most blockDim nodes in all). The
// block's barrier separates the phases: an experiment depends on nothing outside its own nodes,
// so no launch or grid-wide barrier separates two windows. The grid is resident; its blocks
// take slices from a queue: slice i runs group i % n_groups for up to `slice` windows (its
// (i / n_groups)-th slice in this launch), once the group's previous slice has ended (`done`:
// slices ended per group; `queue` and `done` start at zero in every launch). With no more groups
// than resident blocks there is one slice per group, as long as the launch. With more, groups
// take turns, so that the last blocks to end do not run alone as a last partial wave would. A
// slice ends, and a block takes no more, once `budget_ns` has passed (a clean pause between
// windows: the window counts of the nodes and experiments are in memory, and the next launch
// carries on from them); experiments stop at `cap` (the host raises it launch by launch).
// Blocks of MV_GROUP_THREADS per SM the groups kernel is bounded for (registers: 65536 / product):
// 1 with 512 threads, 128 registers (4 blocks of 128 threads per SM).
#define MV_GROUP_MIN_BLOCKS 1
// The group's reports go to shared memory (`acc`, four words per experiment of the group: the
// earliest next and progress times, the tasks and flows finished in this window), and the
// advance publishes nothing beyond the block: its barrier orders the nodes' windows.
// (Not inlined: the kernel spills less so.)
__device__ __noinline__ void group_advance(Ctx* c, int64_t e, int64_t* a) {
  int64_t done = c->exp_done[e] + a[2], acked = c->exp_acked[e] + a[3];
  c->exp_done[e] = done;
  c->exp_acked[e] = acked;
  advance_with(c, e, a[0], a[1], done, acked, false);
  a[0] = a[1] = MV_INF;
  a[2] = a[3] = 0;
}
// Take the next slice (thread 0): its group, or -1 when none is left, or when the budget is spent
// and this block has run a slice already (`worked`). A slice of a group whose experiments all
// ended or reached the cap is passed over here (counted as ended), so that every launch moves
// some experiment forward: such slices come first in every launch once the first groups ended,
// and a budget spent on them stopped launches with "no progress" (experiments/stress_groups_gpu.py).
__device__ __noinline__ int64_t group_take(const Ctx* c, int64_t cap, const int64_t* group_exp, int64_t n_groups,
                                           int64_t n_slices, unsigned long long* queue, int64_t* done, int64_t t0,
                                           int64_t budget_ns, bool worked) {
  for (;;) {
    if (worked && mv_clock_ns() - t0 > budget_ns) return -1;
    int64_t i = (int64_t)atomicAdd(queue, 1ull);
    if (i >= n_slices) return -1;
    int64_t g = i % n_groups, round = i / n_groups;
    while (MV_LOAD_SHARED(done[g]) < round) __nanosleep(128);   // the group's previous slice, elsewhere
    MV_FENCE();   // acquire (with the block's barrier after it): what that slice wrote
    for (int64_t e = group_exp[g]; e < group_exp[g + 1]; ++e)
      if (exp_active(c, e, cap)) return g;
    MV_STORE_SHARED(done[g], round + 1);   // (an empty slice: it wrote nothing)
  }
}
// The switch lanes in the groups kernel (docs/engine.md, "Switch lanes"): a window of the
// switches of at most MV_LANE_PORTS ports (switch_lanes_fit) in three phases, a barrier between
// them. (A) Every thread takes the block's in-ring scans (switch_lane_scan, into the switch's
// records: the scratch column port_lane) until none is left. (B) The hosts and the other
// switches run their windows on their own threads, then every thread takes the block's port
// tasks until none is left: each decides how its switch's window runs (switch_lanes_decide, from
// the records: the same answer for each of its ports), then runs its port's events
// (switch_port_lane) or, port 0 of a switch decided serial, the whole serial window. (C) Each
// switch that ran port by port ends its window (switch_lanes_end) from its ports' reports
// (port_lane_last) and reports, on its own thread. A phase's tasks are taken by whole warps in
// rows of 32 from a shared counter, whichever warp is free (the launcher rounds the block up to
// whole warps), switch-major: every port of the first 32 switches of the group's order, then of
// the next 32 (the switches come first, top-of-rack first, the busiest, so that the rows taken
// last, while the other warps wait at the barrier, are the lightest); a row is the same port of
// 32 neighbouring switches, of one role, so a warp's lanes run alike code together. Results do
// not depend on which thread runs a task. The records live in global memory (scratch), not in
// shared memory: a block's shared memory is carved out of its SM's L1, which bounds this kernel.
// A block whose switches were all calm after a window (nothing pending, no event:
// switch_quiet's premise) runs the next one with every node on its own thread: an idle window
// costs no scans. The switches' serial windows go through a call (lanes_serial_window), so that
// the kernel's own code holds no serial switch window (their local caches and trees spill).
struct LaneBlock {
  int scan_row, port_row;       // rows of the phases' tables taken so far
  int ports;                    // most ports of a switch of the group that runs port by port
  int busy[2];                  // by window parity: a switch of the block was not calm after it
  int ends[MV_LANE_PORTS];      // per port k: the threads [0, ends[k]) hold every such switch with a port k
  int row_end[MV_LANE_PORTS];   // per port k: the warp-rows of ports 0..k (ports' entries of those threads)
  int warp_end[(MV_GROUP_THREADS + 31) / 32];   // per warp of threads g: the rows of warps 0..g
};
// The node of thread t of the block's group (the group's rows start at row0): node_order, a
// permutation within the group (the host puts the group's switches first, the widest first).
MV_DEV int64_t group_node(const Ctx* c, int64_t row0, int64_t t) {
  return c->node_order[row0 + t];
}
// The warp-rows of a phase's table: per port k, the entries of threads [0, ends[k]) (the group's
// switches come first, the widest first, so a row is the same port of 32 neighbouring switches
// and few rows hold none), taken by whole warps from `counter` until none is left, task(v, k)
// for each entry of a node of the group (`rows_used` nodes). The block is whole warps (the
// launcher rounds it up: mv_run_groups traps otherwise).
template <class Task>
MV_DEV void lanes_rows(const Ctx* c, int64_t row0, int64_t rows_used, const LaneBlock& lanes,
                       int* counter, const Task& task) {
  int rows = lanes.ports ? lanes.row_end[lanes.ports - 1] : 0, lane = threadIdx.x & 31;
  for (;;) {
    __syncwarp();
    int row = 0;
    if (lane == 0) row = atomicAdd(counter, 1);
    row = __shfl_sync(0xffffffffu, row, 0);
    if (row >= rows) return;
    int g = 0;
    while (row >= lanes.warp_end[g]) ++g;
    int k = row - (g ? lanes.warp_end[g - 1] : 0), t = g * 32 + lane;
    if (t < lanes.ends[k] && t < rows_used) task(group_node(c, row0, t), (int64_t)k);
  }
}
// The tables' rows of a slice's group, once every thread with a switch of n ports has raised
// ends[n - 1] to its index + 1: per port k, the threads up to the furthest switch with a port k,
// the warp-rows of ports 0..k, and per warp of threads g the rows of warps 0..g, warp g holding
// a row for each port k with ends[k] beyond its first thread (the ends do not grow with k, so
// those are ports 0..m-1): a row per port and warp of threads [0, ends[k]).
MV_DEV void lanes_table(LaneBlock* lanes) {
  int end = 0, rows = 0;
  for (int k = lanes->ports - 1; k >= 0; --k) lanes->ends[k] = end = mv_max(end, lanes->ends[k]);
  for (int k = 0; k < lanes->ports; ++k) lanes->row_end[k] = rows += (lanes->ends[k] + 31) / 32;
  rows = 0;
  for (int g = 0; lanes->ports && g * 32 < lanes->ends[0]; ++g) {
    int m = 0;
    while (m < lanes->ports && lanes->ends[m] > g * 32) ++m;
    lanes->warp_end[g] = rows += m;
  }
}
// Switch v's records of the window (LaneRecs: in its ports' rows of the column) and whether its
// window runs in lanes here.
MV_DEV LaneRecs lane_records(const Ctx* c, int64_t v) {
  int64_t lo = c->node_port_lo[v];
  return lane_recs(c->port_lane + lo * NLR, c->node_port_hi[v] - lo);
}
MV_DEV bool lanes_here(const Ctx* c, int64_t v, int64_t cap) {
  return switch_lanes_fit(c, v) && exp_active(c, c->node_exp[v], cap);
}
// Phase A's task: in-ring k of switch v.
__device__ __noinline__ void lanes_scan_task(Ctx* c, int64_t v, int64_t k, int64_t cap) {
  if (!lanes_here(c, v, cap) || k >= c->node_port_hi[v] - c->node_port_lo[v]) return;
  int64_t e = c->node_exp[v];
  switch_lane_scan_of(c, e, v, c->exp_T_ps[e] + c->exp_window_ps[e], parity(c, e), k, lane_records(c, v));
}
// A node's own window in phase B: a switch's serial window on its port 0's task (a function of
// its own: inlined into the port task, the serial loops, the wide switches' too, made it spill
// more), and the calm blocks' switches' windows. Only switches call it: the hosts' code is left
// out of it (NODE_SWITCH), and with it their registers.
__device__ __noinline__ void lanes_serial_window(Ctx* c, int64_t v, int64_t* a) {
  node_window_into<NODE_SWITCH>(c, v, a, a + 1, a + 2, a + 3, false);
}
// Phase B's task: port k of switch v (`acc`: the group's reports, from experiment e_lo).
__device__ __noinline__ void lanes_port_task(Ctx* c, int64_t v, int64_t k, int64_t cap, int64_t* acc, int64_t e_lo) {
  int64_t lo = c->node_port_lo[v], n = c->node_port_hi[v] - lo;
  if (!lanes_here(c, v, cap) || k >= n) return;
  int64_t e = c->node_exp[v];
  LaneRecs r = lane_records(c, v);
  LaneShare share;   // (this port's share of the never-used pool slots)
  int how = switch_lanes_decide(c, e, v, r, &share, k);
  if (k == 0) c->node_lane[v] = how;
  if (how != LANES_RUN) {   // the serial window (the scans did node_begin's copies), or none
    int64_t* a = acc + 4 * (e - e_lo);
    if (k == 0) lanes_serial_window(c, v, a);
    return;
  }
  int64_t last = c->exp_T_ps[e];
  int got = switch_port_lane_of(c, e, v, c->exp_T_ps[e] + c->exp_window_ps[e], parity(c, e), k, r, share, &last);
  c->port_lane_last[lo + k] = got < 0 ? -2 : got > 0 ? last : -1;
}
// Phase C for a switch that ran port by port: its window's end from its ports' reports, and its
// report to `a`.
__device__ __noinline__ void lanes_end(Ctx* c, int64_t v, int64_t* a) {
  int64_t e = c->node_exp[v], lo = c->node_port_lo[v], hi = c->node_port_hi[v];
  int64_t last = c->exp_T_ps[e];
  bool busy = false, out = false;
  for (int64_t p = lo; p < hi; ++p) {
    int64_t t = c->port_lane_last[p];
    if (t == -2) out = true;
    else if (t >= 0) {
      busy = true;
      last = mv_max(last, t);
    }
  }
  switch_lanes_end(c, e, v, c->exp_T_ps[e] + c->exp_window_ps[e], parity(c, e), busy, last, out, lane_records(c, v));
  int64_t next = c->node_next_ps[v], prog = c->node_prog_ps[v];
  if (next < MV_INF) atomicMin(a, next);
  if (prog < MV_INF) atomicMin(a + 1, prog);
  c->node_iter[v] += 1;
}

// After a window's port tasks, switch v's per-port counts zero again for the next window's scans
// (they add to them).
MV_DEV void lanes_clear(Ctx* c, int64_t v) {
  LaneRecs r = lane_records(c, v);
  for (int64_t k = 0; k < r.n; ++k) r.want[k] = 0;
}

// `acc_words`: the reports' words (the dynamic shared memory).
MV_GLOBAL void __launch_bounds__(MV_GROUP_THREADS, MV_GROUP_MIN_BLOCKS) mv_run_groups(int64_t cap, const int64_t* group_exp,
                                                                    int64_t n_groups, int64_t slice, int64_t n_slices,
                                                                    unsigned long long* queue, int64_t* done,
                                                                    int64_t budget_ns, int64_t acc_words) {
  Ctx* c = const_cast<Ctx*>(&mv_ctx);
  extern __shared__ int64_t acc[];
  __shared__ int64_t group;
  __shared__ int64_t t0;
  __shared__ int stop;     // the budget is spent: the slice ends after this window
  __shared__ int worked;   // this block took a slice (thread 0's)
  __shared__ LaneBlock lanes;
  if (threadIdx.x == 0) {
    t0 = mv_clock_ns();
    worked = 0;
    if (blockDim.x % 32) __trap();   // (lanes_rows takes whole warps: the launcher rounds blocks up)
    lanes.scan_row = lanes.port_row = 0;
  }
  for (;;) {
    if (threadIdx.x == 0) {
      group = group_take(c, cap, group_exp, n_groups, n_slices, queue, done, t0, budget_ns, worked);
      worked = 1;
      lanes.ports = 0;
      for (int k = 0; k < MV_LANE_PORTS; ++k) lanes.ends[k] = 0;
      lanes.busy[0] = 1;   // (a slice's first window runs in lanes)
      lanes.busy[1] = 0;
    }
    __syncthreads();
    if (group < 0) return;
    MV_FENCE();   // acquire, in every thread too (the previous slice may have run on another SM)
    for (int64_t k = threadIdx.x; k < group_exp[group + 1] - group_exp[group]; k += blockDim.x) {
      acc[4 * k] = acc[4 * k + 1] = MV_INF;
      acc[4 * k + 2] = acc[4 * k + 3] = 0;
    }
    {  // the tables' rows: the most ports of a switch of the group that may run port by port, and
       // per width the furthest thread with a switch of it
      int64_t row0 = c->exp_node_lo[group_exp[group]];
      if (threadIdx.x < c->exp_node_hi[group_exp[group + 1] - 1] - row0) {
        int64_t u = group_node(c, row0, threadIdx.x);
        if (switch_lanes_fit(c, u)) {
          int n = (int)(c->node_port_hi[u] - c->node_port_lo[u]);
          atomicMax(&lanes.ports, n);
          atomicMax(&lanes.ends[n - 1], (int)threadIdx.x + 1);
        }
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) lanes_table(&lanes);
    __syncthreads();
    for (int64_t w = 0; w < slice; ++w) {
      // (the block's rows are read again each window, not kept: registers the window needs)
      int64_t e_lo = group_exp[group];
      int64_t v = c->exp_node_lo[e_lo] + threadIdx.x;
      int64_t row0 = c->exp_node_lo[e_lo], rows_used = c->exp_node_hi[group_exp[group + 1] - 1] - row0;
      bool has_node = threadIdx.x < rows_used;
      if (has_node) v = group_node(c, row0, threadIdx.x);
      bool mine_here = has_node && lanes_here(c, v, cap);   // (a switch of ours that may run in lanes)
      bool in_lanes = lanes.busy[w & 1];   // (else every switch was calm: each node on its thread)
      if (in_lanes) {
        lanes_rows(c, row0, rows_used, lanes, &lanes.scan_row,
                   [&](int64_t u, int64_t k) { lanes_scan_task(c, u, k, cap); });
        __syncthreads();   // (phase A's records and decisions visible to the block)
        if (threadIdx.x == 0) lanes.scan_row = 0;   // (read again after the window's barriers)
      }
      if (has_node && !(in_lanes && mine_here) && exp_active(c, c->node_exp[v], cap)) {
        int64_t* a = acc + 4 * (c->node_exp[v] - e_lo);
        if (c->node_is_host[v]) node_window_into<NODE_HOST>(c, v, a, a + 1, a + 2, a + 3, false);
        else lanes_serial_window(c, v, a);
      }
      if (in_lanes) {
        lanes_rows(c, row0, rows_used, lanes, &lanes.port_row,
                   [&](int64_t u, int64_t k) { lanes_port_task(c, u, k, cap, acc, e_lo); });
        __syncthreads();   // (phase B's port events visible to the switches' ends)
        if (mine_here) {
          if (c->node_lane[v] == LANES_RUN) lanes_end(c, v, acc + 4 * (c->node_exp[v] - e_lo));
          lanes_clear(c, v);   // (the port tasks have read the counts the scans added up)
        }
      }
      __syncthreads();   // (also makes the window's global writes visible to the block)
      // whether the next window runs in lanes: a switch of the block was not calm after this one
      // (busy[w & 1], read at this window's start, is written again in the next window, after
      // the barrier below)
      if (mine_here && !(c->node_next_ps[v] >= MV_INF && c->node_quiet[v])) lanes.busy[(w + 1) & 1] = 1;
      if (threadIdx.x == 0) lanes.port_row = lanes.busy[w & 1] = 0;
      int64_t mine = group_exp[group] + threadIdx.x;   // the experiment this thread advances, if any
      bool advances = mine < group_exp[group + 1];
      if (advances && exp_active(c, mine, cap)) group_advance(c, mine, acc + 4 * threadIdx.x);
      if (threadIdx.x == 0) stop = mv_clock_ns() - t0 > budget_ns;
      if (!__syncthreads_or(advances && exp_active(c, mine, cap)) || stop) break;
    }
    MV_FENCE();        // release: the slice's writes before its count (every thread's, and then
    __syncthreads();   // thread 0's after the barrier; nobody reads `group` after it)
    if (threadIdx.x == 0) {
      MV_FENCE();
      MV_STORE_SHARED(done[group], done[group] + 1);
    }
  }
}

MV_DEV void window_row(Ctx* c, int64_t i, int64_t cap) {
  int64_t v = c->node_order[i], e = c->node_exp[v];
  if (exp_active(c, e, cap)) node_window_report(c, v, e);
}

// The two phases as two launches ("graph"; the launch boundary is the barrier). `steal` (a batch
// of several waves of blocks): the grid is resident and its warps take the next 32 rows of
// node_order from a counter (`next_row`, reset by the advance) until none is left. A warp that
// finished early takes more rows, where the blocks of a full grid hold their SM until their
// slowest warp ends and the last partial wave runs alone.
MV_GLOBAL void __launch_bounds__(MV_THREADS, MV_WINDOW_MIN_BLOCKS) mv_phase_window(int64_t cap,
                                                                                  unsigned long long* next_row,
                                                                                  int steal) {
  Ctx* c = const_cast<Ctx*>(&mv_ctx);
  const int lane = threadIdx.x & 31;
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;   // (without steal: grid-stride rows)
  for (;;) {
    if (steal) {
      unsigned long long base = 0;
      if (lane == 0) base = atomicAdd(next_row, 32ull);
      base = __shfl_sync(0xffffffffu, base, 0);
      if (base >= (unsigned long long)c->n_node) return;
      i = (int64_t)base + lane;
    } else if (i >= c->n_node) {
      return;
    }
    // (one call site: nvcc inlines the node's window, where a second one made it a call, around
    // which the kernel spilled)
    if (i < c->n_node) window_row(c, i, cap);
    if (!steal) i += (int64_t)gridDim.x * blockDim.x;
  }
}
MV_GLOBAL void __launch_bounds__(MV_THREADS) mv_phase_advance(int64_t cap, unsigned long long* next_row) {
  Ctx* c = const_cast<Ctx*>(&mv_ctx);
  if (blockIdx.x == 0 && threadIdx.x == 0) *next_row = 0;   // the next window kernel starts from row 0
  MV_FOR(e, c->n_exp) if (exp_active(c, e, cap)) advance_reported(c, e);
}
