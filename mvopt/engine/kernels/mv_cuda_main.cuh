// GPU entry points. Three ways to run the same two-phase step (kernels/mv_step.cuh), chosen by
// the host (GpuBackend's `launch`); all give identical results:
//   mv_phase_*     (default, "graph") one launch per phase (the launch boundary is the barrier),
//                  replayed as a CUDA graph. (Advancing each experiment inside the window launch,
//                  by the last of its nodes to finish, measured slower: docs/performance.md.)
//   mv_run_coop    one cooperative launch, a grid-wide barrier after each phase.
//   mv_run_groups  ("groups") one launch, each experiment's nodes in one block: the block's
//                  barrier separates the phases, window after window (experiments of at most
//                  MV_GROUP_THREADS nodes).
//   mv_run_async   one launch, no grid-wide barrier: the nodes of an experiment report the end of
//                  their window to it, and the last one to arrive advances the experiment, which
//                  lets its nodes start the next window (no thread waits for the slowest node of
//                  the whole batch; measured slower than the barriers, docs/performance.md).
// Every mode runs an experiment only while exp_iter < `cap` (the host raises the cap launch by
// launch, so that it regains control regularly).
// The column pointers live in constant memory (set by the host before a launch): every system
// reads them through the constant cache, and the compiler may keep them in registers across
// stores, since nothing the kernels write can alias constant memory. (Passed as a pointer to
// global memory, each `c->col[i]` was two dependent global loads.)
__constant__ Ctx mv_ctx;

// Block size (the launcher's THREADS) and the blocks per SM the register allocation must allow;
// both can be overridden at compile time (-D) to measure variants. The kernels are latency-bound,
// so resident warps matter: left alone, nvcc 13 gave the megakernels 176-177 registers, 2 blocks
// of 128 per SM; capped for 3 blocks they got 168 with 40-44 bytes of spills (sm_90); with
// read-only parameter columns the one-launch kernels need 136, the window kernel 128.
#ifndef MV_THREADS
#define MV_THREADS 128
#endif
#ifndef MV_MIN_BLOCKS
#define MV_MIN_BLOCKS 3
#endif
// The graph mode's window kernel (the default) fits 4 blocks per SM in 128 registers without
// spills since the parameter columns are read-only (MvRo); the bound keeps it there (coop and
// async would spill 16-44 bytes at 4).
#ifndef MV_WINDOW_MIN_BLOCKS
#define MV_WINDOW_MIN_BLOCKS 4
#endif

MV_DEV bool exp_active(const Ctx* c, int64_t e, int64_t cap) {
  return c->exp_status[e] == ST_RUN && c->exp_iter[e] < cap;
}

// Node v's window, then its report to experiment e: the minimum of the next-event and progress
// times and the tasks and flows it finished (integer minima and sums: the order in which the
// nodes report cannot change the result).
// `acc`: the experiment's four accumulators (next, prog, done, acked), in global or shared memory.
// (A report of MV_INF, e.g. a quiet switch's, changes nothing: no atomic.) `lanes`: whether a
// switch's window may run port by port on this thread (the CPU's way, MV_SWITCH_LANES 1); with
// MV_SWITCH_LANES 2 only the groups kernel runs windows port by port, on its free threads, and
// the other launch modes keep the serial loop.
// HOSTS: v is a host (node_window's).
template <bool HOSTS = false>
MV_DEV void node_window_into(Ctx* c, int64_t v, int64_t* next_acc, int64_t* prog_acc, int64_t* done_acc,
                             int64_t* acked_acc, bool lanes = MV_SWITCH_LANES != 2) {
  int32_t done0 = c->node_tasks_done[v], acked0 = c->node_flows_acked[v];
  node_window<HOSTS>(c, v, lanes);
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

// Node v's window and report, then its arrival at experiment e: the last of e's nodes to arrive
// (every other one has finished this window and reported) advances e.
MV_DEV void node_window_arrive(Ctx* c, int64_t v, int64_t e) {
  node_window_report(c, v, e);
  MV_FENCE();   // release: this window's writes before the arrival
  if (atomicAdd(&c->exp_arrive[e], 1) == (int)(c->exp_node_hi[e] - c->exp_node_lo[e]) - 1) {
    c->exp_arrive[e] = 0;
    MV_FENCE();   // acquire: the other nodes' writes and reports are visible now
    advance_reported(c, e);
  }
}

MV_DEV int64_t mv_clock_ns() {
  int64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// `budget_ns`: a thread stops taking windows after this long (a launch returns within about a
// second, whatever the batch). Stopping between windows is a clean pause: the window counts of
// the nodes and experiments are in memory, and the next launch carries on from them.
MV_GLOBAL void __launch_bounds__(MV_THREADS, MV_MIN_BLOCKS) mv_run_async(int64_t cap, int64_t budget_ns) {
  Ctx* c = const_cast<Ctx*>(&mv_ctx);
  int64_t t0 = mv_clock_ns();
  for (;;) {
    bool live = false, worked = false;
    MV_FOR(i, c->n_node) {
      int64_t v = c->node_order[i], e = c->node_exp[v], k = c->node_iter[v];
      if (MV_LOAD_SHARED(c->exp_iter[e]) != k) { live = true; continue; }   // others still in window k - 1
      MV_FENCE();   // acquire: what the experiment's nodes and its advance wrote is visible now
      if (!exp_active(c, e, cap)) continue;
      live = worked = true;
      node_window_arrive(c, v, e);
    }
    if (!live || mv_clock_ns() - t0 > budget_ns) return;   // all my nodes' experiments ended or reached the cap
    if (!worked) __nanosleep(256);
  }
}

// `out[0..1]`: experiments still active after an iteration (the only atomic besides the
// reports: it decides when to stop and never feeds into the simulation itself).
MV_GLOBAL void __launch_bounds__(MV_THREADS, MV_MIN_BLOCKS) mv_run_coop(int64_t cap, int64_t* out) {
  Ctx* c = const_cast<Ctx*>(&mv_ctx);
  cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  int* running = (int*)&out[1];
  bool lead = blockIdx.x == 0 && threadIdx.x == 0;
  if (lead) { running[0] = 0; running[1] = 0; }
  grid.sync();
  for (int64_t it = 0;; ++it) {
    MV_FOR(i, c->n_node) {
      int64_t v = c->node_order[i], e = c->node_exp[v];
      if (exp_active(c, e, cap)) node_window_report(c, v, e);
    }
    grid.sync();
    MV_FOR(e, c->n_exp) {
      if (!exp_active(c, e, cap)) continue;
      advance_reported(c, e);
      if (exp_active(c, e, cap)) atomicAdd(&running[it & 1], 1);
    }
    if (lead) running[(it + 1) & 1] = 0;   // next iteration's counter; nobody adds to it before the next sync
    grid.sync();
    if (running[it & 1] == 0) return;
  }
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
// windows); experiments stop at `cap` (the host raises it launch by launch).
#ifndef MV_GROUP_THREADS
#define MV_GROUP_THREADS 512   // the largest block (and so experiment) this kernel takes: 128 registers
#endif
// Blocks of MV_GROUP_THREADS per SM the groups kernel is bounded for (registers: 65536 / product).
// 1 with 512 threads: 128 registers, 4 blocks of 128 threads per SM. A variant to measure raises
// it with MV_GROUP_THREADS 128 (6: 80 registers, 8: 64), more warps to hide the loads' latency.
#ifndef MV_GROUP_MIN_BLOCKS
#define MV_GROUP_MIN_BLOCKS 1
#endif
// The group's reports go to shared memory (`acc`, four words per experiment of the group: the
// earliest next and progress times, the tasks and flows finished in this window), and the
// advance publishes nothing beyond the block: its barrier orders the nodes' windows.
// (Not inlined: the kernel spills less so, nvcc 13, sm_90.)
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
// MV_SWITCH_LANES 2 (the groups kernel's default on the GPU, set by _gpu.py: docs/engine.md, "Switch lanes"): a window
// of the switches of at most MV_LANE_PORTS ports (switch_lanes_fit) in three phases, a barrier
// between them. (A) Every thread takes the block's in-ring scans (switch_lane_scan, into the
// switch's records: the scratch column port_lane) until none is left. (B) The hosts and the
// other switches run their windows on their own threads, then every thread takes the block's
// port tasks until none is left: each decides how its switch's window runs
// (switch_lanes_decide, from the records: the same answer for each of its ports), then runs its
// port's events (switch_port_lane) or, port 0 of a switch decided serial, the whole serial
// window. (C) Each switch that ran port by port ends its window (switch_lanes_end) from its
// ports' reports (port_lane_last) and reports, on its own thread. A phase's tasks are, port by
// port, the entries of the threads that hold the group's switches with that port (the group's
// switches come first, the widest first: per port k the threads [0, ends[k]), lanes_table),
// taken by whole warps in rows of 32 from a shared counter, whichever warp is free (the launcher
// rounds the block up to whole warps): a row is the same port of 32 neighbouring switches, of
// one role where the node order groups roles, so a warp's lanes run alike code together.
// Results do not depend on which thread runs a task. The records live in global memory
// (scratch), not in shared memory: a
// block's shared memory is carved out of its SM's L1, which bounds this kernel
// (docs/performance.md). A block whose switches were all calm after a window (nothing pending,
// no event: switch_quiet's premise) runs the next one as the plain groups kernel does, every
// node on its own thread: an idle window costs no scans. (Measured, seventeenth session: a
// counter per switch, so that its last scan decides and its last port task ends the window,
// saves a barrier and the decisions per port but lost 4 %: docs/performance.md.)
#if MV_SWITCH_LANES == 2
#ifndef MV_LANES_CALM
#define MV_LANES_CALM 1   // 0: every window in lanes (a variant to measure the calm blocks' check)
#endif
// 1: the hosts' windows inlined, the switches' (calm blocks', wide switches') through
// lanes_serial_window, so that the kernel's own code holds no serial switch window (their local
// caches and trees: nvcc, the kernel's stack frame 752 bytes and spills 104 / 288 bytes, against
// 928 and 140 / 544 with them inlined).
// Measured (twentieth session, H200, (a) 8 MiB x 4,096): 2.108 / 2.103 against 2.077 / 2.080 G
// packet-hops/s; with MV_LANES_ROWS_BY_SWITCH 2.224 / 2.219 against 2.171 / 2.166 with that
// alone, so the default, 1 (0: every window inlined). (The hosts' windows through the call too lost:
// 1.701 / 1.700 against 1.746 / 1.747 inlined, nineteenth session; removed in the twentieth.)
#ifndef MV_LANES_SWITCH_CALL
#define MV_LANES_SWITCH_CALL 1
#endif
// 1: a phase's warp-rows taken switch-major (every port of the first 32 switches, then of the
// next 32 ...) instead of port-major (port 0 of every switch, then port 1 ...): the switches
// come first in the order top-of-rack first, the busiest, so that the rows taken last, while
// the other warps wait at the barrier, are the lightest. Measured (twentieth session, H200, (a)
// 8 MiB x 4,096): 2.171 / 2.166 against 2.077 / 2.080 G packet-hops/s port-major, so the default,
// 1 (0: port-major).
#ifndef MV_LANES_ROWS_BY_SWITCH
#define MV_LANES_ROWS_BY_SWITCH 1
#endif
struct LaneBlock {
  int scan_row, port_row;       // rows of the phases' tables taken so far
  int ports;                    // most ports of a switch of the group that runs port by port
  int busy[2];                  // by window parity: a switch of the block was not calm after it
  int ends[MV_LANE_PORTS];      // per port k: the threads [0, ends[k]) hold every such switch with a port k
  int row_end[MV_LANE_PORTS];   // per port k: the warp-rows of ports 0..k (ports' entries of those threads)
#if MV_LANES_ROWS_BY_SWITCH
  int warp_end[(MV_GROUP_THREADS + 31) / 32];   // per warp of threads g: the rows of warps 0..g
#endif
};
// The node of thread t of the block's group (the group's rows start at row0).
MV_DEV int64_t group_node(const Ctx* c, int64_t row0, int64_t t, int ordered) {
  int64_t v = row0 + t;
  return ordered ? c->node_order[v] : v;
}
// The warp-rows of a phase's table: per port k, the entries of threads [0, ends[k]) (the group's
// switches come first, the widest first, so a row is the same port of 32 neighbouring switches
// and few rows hold none), taken by whole warps from `counter` until none is left, task(v, k)
// for each entry of a node of the group (`rows_used` nodes). The block is whole warps (the
// launcher rounds it up: mv_run_groups traps otherwise).
template <class Task>
MV_DEV void lanes_rows(const Ctx* c, int64_t row0, int64_t rows_used, int ordered, const LaneBlock& lanes,
                       int* counter, const Task& task) {
  int rows = lanes.ports ? lanes.row_end[lanes.ports - 1] : 0, lane = threadIdx.x & 31;
  for (;;) {
    __syncwarp();
    int row = 0;
    if (lane == 0) row = atomicAdd(counter, 1);
    row = __shfl_sync(0xffffffffu, row, 0);
    if (row >= rows) return;
#if MV_LANES_ROWS_BY_SWITCH   // (row: warp g's port k)
    int g = 0;
    while (row >= lanes.warp_end[g]) ++g;
    int k = row - (g ? lanes.warp_end[g - 1] : 0), t = g * 32 + lane;
#else                         // (row: port k's warp of threads)
    int k = 0;
    while (row >= lanes.row_end[k]) ++k;
    int t = (row - (k ? lanes.row_end[k - 1] : 0)) * 32 + lane;
#endif
    if (t < lanes.ends[k] && t < rows_used) task(group_node(c, row0, t, ordered), (int64_t)k);
  }
}
// The tables' rows of a slice's group, once every thread with a switch of n ports has raised
// ends[n - 1] to its index + 1: per port k, the threads up to the furthest switch with a port k,
// and the warp-rows of ports 0..k (MV_LANES_ROWS_BY_SWITCH: per warp of threads g, the rows of
// warps 0..g, warp g holding a row for each port k with ends[k] beyond its first thread: the ends
// do not grow with k, so those are ports 0..m-1). Either way a row per port and warp of threads
// [0, ends[k]).
MV_DEV void lanes_table(LaneBlock* lanes) {
  int end = 0, rows = 0;
  for (int k = lanes->ports - 1; k >= 0; --k) lanes->ends[k] = end = mv_max(end, lanes->ends[k]);
  for (int k = 0; k < lanes->ports; ++k) lanes->row_end[k] = rows += (lanes->ends[k] + 31) / 32;
#if MV_LANES_ROWS_BY_SWITCH
  rows = 0;
  for (int g = 0; lanes->ports && g * 32 < lanes->ends[0]; ++g) {
    int m = 0;
    while (m < lanes->ports && lanes->ends[m] > g * 32) ++m;
    lanes->warp_end[g] = rows += m;
  }
#endif
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
// more), and the calm blocks' switches' windows (MV_LANES_SWITCH_CALL).
__device__ __noinline__ void lanes_serial_window(Ctx* c, int64_t v, int64_t* a) {
  node_window_into(c, v, a, a + 1, a + 2, a + 3, false);
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
#endif

// `acc_words`: the reports' words (the dynamic shared memory); `ordered`: thread t of a group
// runs node node_order[first node + t] (a permutation within the group), else the node itself.
MV_GLOBAL void __launch_bounds__(MV_GROUP_THREADS, MV_GROUP_MIN_BLOCKS) mv_run_groups(int64_t cap, const int64_t* group_exp,
                                                                    int64_t n_groups, int64_t slice, int64_t n_slices,
                                                                    unsigned long long* queue, int64_t* done,
                                                                    int64_t budget_ns, int64_t acc_words, int ordered) {
  Ctx* c = const_cast<Ctx*>(&mv_ctx);
  extern __shared__ int64_t acc[];
  __shared__ int64_t group;
  __shared__ int64_t t0;
  __shared__ int stop;     // the budget is spent: the slice ends after this window
  __shared__ int worked;   // this block took a slice (thread 0's)
#if MV_SWITCH_LANES == 2
  __shared__ LaneBlock lanes;
#endif
  if (threadIdx.x == 0) {
    t0 = mv_clock_ns();
    worked = 0;
#if MV_SWITCH_LANES == 2
    if (blockDim.x % 32) __trap();   // (lanes_rows takes whole warps: the launcher rounds blocks up)
    lanes.scan_row = lanes.port_row = 0;
#endif
  }
  for (;;) {
    if (threadIdx.x == 0) {
      group = group_take(c, cap, group_exp, n_groups, n_slices, queue, done, t0, budget_ns, worked);
      worked = 1;
#if MV_SWITCH_LANES == 2
      lanes.ports = 0;
      for (int k = 0; k < MV_LANE_PORTS; ++k) lanes.ends[k] = 0;
      lanes.busy[0] = 1;   // (a slice's first window runs in lanes)
      lanes.busy[1] = 0;
#endif
    }
    __syncthreads();
    if (group < 0) return;
    MV_FENCE();   // acquire, in every thread too (the previous slice may have run on another SM)
    for (int64_t k = threadIdx.x; k < group_exp[group + 1] - group_exp[group]; k += blockDim.x) {
      acc[4 * k] = acc[4 * k + 1] = MV_INF;
      acc[4 * k + 2] = acc[4 * k + 3] = 0;
    }
#if MV_SWITCH_LANES == 2
    {  // the tables' rows: the most ports of a switch of the group that may run port by port, and
       // per width the furthest thread with a switch of it
      int64_t row0 = c->exp_node_lo[group_exp[group]];
      if (threadIdx.x < c->exp_node_hi[group_exp[group + 1] - 1] - row0) {
        int64_t u = group_node(c, row0, threadIdx.x, ordered);
        if (switch_lanes_fit(c, u)) {
          int n = (int)(c->node_port_hi[u] - c->node_port_lo[u]);
          atomicMax(&lanes.ports, n);
          atomicMax(&lanes.ends[n - 1], (int)threadIdx.x + 1);
        }
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) lanes_table(&lanes);
#endif
    __syncthreads();
    for (int64_t w = 0; w < slice; ++w) {
      // (the block's rows are read again each window, not kept: registers the window needs)
      int64_t e_lo = group_exp[group];
      int64_t v = c->exp_node_lo[e_lo] + threadIdx.x;
#if MV_SWITCH_LANES == 2
      int64_t row0 = c->exp_node_lo[e_lo], rows_used = c->exp_node_hi[group_exp[group + 1] - 1] - row0;
      bool has_node = threadIdx.x < rows_used;
      if (has_node) v = group_node(c, row0, threadIdx.x, ordered);
      bool mine_here = has_node && lanes_here(c, v, cap);   // (a switch of ours that may run in lanes)
      bool in_lanes = !MV_LANES_CALM || lanes.busy[w & 1];   // (else every switch was calm: each node on its thread)
      if (in_lanes) {
        lanes_rows(c, row0, rows_used, ordered, lanes, &lanes.scan_row,
                   [&](int64_t u, int64_t k) { lanes_scan_task(c, u, k, cap); });
        __syncthreads();   // (phase A's records and decisions visible to the block)
        if (threadIdx.x == 0) lanes.scan_row = 0;   // (read again after the window's barriers)
      }
      if (has_node && !(in_lanes && mine_here) && exp_active(c, c->node_exp[v], cap)) {
        int64_t* a = acc + 4 * (c->node_exp[v] - e_lo);
#if MV_LANES_SWITCH_CALL
        if (c->node_is_host[v]) node_window_into<true>(c, v, a, a + 1, a + 2, a + 3, false);
        else lanes_serial_window(c, v, a);
#else
        node_window_into(c, v, a, a + 1, a + 2, a + 3, false);
#endif
      }
      if (in_lanes) {
        lanes_rows(c, row0, rows_used, ordered, lanes, &lanes.port_row,
                   [&](int64_t u, int64_t k) { lanes_port_task(c, u, k, cap, acc, e_lo); });
        __syncthreads();   // (phase B's port events visible to the switches' ends)
        if (mine_here && c->node_lane[v] == LANES_RUN) lanes_end(c, v, acc + 4 * (c->node_exp[v] - e_lo));
      }
#else
      if (v < c->exp_node_hi[group_exp[group + 1] - 1]) {
        if (ordered) v = c->node_order[v];   // (a permutation within the group's rows)
        int64_t e = c->node_exp[v];
        int64_t* a = acc + 4 * (e - e_lo);
        if (exp_active(c, e, cap)) node_window_into(c, v, a, a + 1, a + 2, a + 3);
      }
#endif
      __syncthreads();   // (also makes the window's global writes visible to the block)
#if MV_SWITCH_LANES == 2
      // whether the next window runs in lanes: a switch of the block was not calm after this one
      // (busy[w & 1], read at this window's start, is written again in the next window, after
      // the barrier below)
      if (MV_LANES_CALM && mine_here && !(c->node_next_ps[v] >= MV_INF && c->node_quiet[v])) lanes.busy[(w + 1) & 1] = 1;
      if (threadIdx.x == 0) lanes.port_row = lanes.busy[w & 1] = 0;
#endif
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
// slowest warp ends and the last partial wave runs alone (measured: docs/performance.md).
MV_GLOBAL void __launch_bounds__(MV_THREADS, MV_WINDOW_MIN_BLOCKS) mv_phase_window(int64_t cap,
                                                                                  unsigned long long* next_row,
                                                                                  int steal) {
  Ctx* c = const_cast<Ctx*>(&mv_ctx);
  if (!steal) {
    MV_FOR(i, c->n_node) window_row(c, i, cap);
    return;
  }
  const int lane = threadIdx.x & 31;
  for (;;) {
    unsigned long long base = 0;
    if (lane == 0) base = atomicAdd(next_row, 32ull);
    base = __shfl_sync(0xffffffffu, base, 0);
    if (base >= (unsigned long long)c->n_node) return;
    int64_t i = (int64_t)base + lane;
    if (i < c->n_node) window_row(c, i, cap);
  }
}
MV_GLOBAL void __launch_bounds__(MV_THREADS) mv_phase_advance(int64_t cap, unsigned long long* next_row) {
  Ctx* c = const_cast<Ctx*>(&mv_ctx);
  if (blockIdx.x == 0 && threadIdx.x == 0) *next_row = 0;   // the next window kernel starts from row 0
  MV_FOR(e, c->n_exp) if (exp_active(c, e, cap)) advance_reported(c, e);
}
