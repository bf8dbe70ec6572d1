// GPU entry point: the megakernel. One cooperative launch runs many iterations; the three
// phases of an iteration are separated by grid-wide barriers. `running[parity]` counts the
// experiments still running after an iteration (the only atomic: it decides when to stop and
// never feeds into the simulation itself).
// The column pointers live in constant memory (set by the host before a launch): every system
// reads them through the constant cache, and the compiler may keep them in registers across
// stores, since nothing the kernels write can alias constant memory. (Passed as a pointer to
// global memory, each `c->col[i]` was two dependent global loads.)
__constant__ Ctx mv_ctx;

// Block size (the launcher's THREADS) and the blocks per SM the register allocation must allow;
// both can be overridden at compile time (-D) to measure variants.
#ifndef MV_THREADS
#define MV_THREADS 128
#endif
#ifndef MV_MIN_BLOCKS
#define MV_MIN_BLOCKS 1
#endif

MV_GLOBAL void __launch_bounds__(MV_THREADS, MV_MIN_BLOCKS) mv_run_coop(int64_t max_iters, int64_t* out) {
  Ctx* c = const_cast<Ctx*>(&mv_ctx);
  cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  int* running = (int*)&out[1];
  bool lead = blockIdx.x == 0 && threadIdx.x == 0;
  if (lead) { running[0] = 0; running[1] = 0; }
  grid.sync();
  int64_t it = 0;
  for (; it < max_iters; ++it) {
    MV_FOR(v, c->n_node) schedule_phase_node(c, v);
    grid.sync();
    MV_FOR(i, c->n_node) network_node(c, c->node_order[i]);
    grid.sync();
    MV_FOR(e, c->n_exp) {
      advance_exp(c, e);
      if (c->exp_status[e] == ST_RUN) atomicAdd(&running[it & 1], 1);
    }
    if (lead) running[(it + 1) & 1] = 0;   // next iteration's counter; nobody adds to it before the next sync
    grid.sync();
    if (running[it & 1] == 0) { ++it; break; }
  }
  if (lead) out[0] = it;
}

// The same iteration as one launch per phase (no grid barrier: the launch boundary is the
// barrier), for grids larger than what fits at once and for comparison with the megakernel.
// The host replays a CUDA graph of many iterations; a finished experiment's phases do nothing.
MV_GLOBAL void __launch_bounds__(MV_THREADS) mv_phase_schedule() {
  Ctx* c = const_cast<Ctx*>(&mv_ctx);
  MV_FOR(v, c->n_node) schedule_phase_node(c, v);
}
MV_GLOBAL void __launch_bounds__(MV_THREADS) mv_phase_network() {
  Ctx* c = const_cast<Ctx*>(&mv_ctx);
  MV_FOR(i, c->n_node) network_node(c, c->node_order[i]);
}
MV_GLOBAL void __launch_bounds__(MV_THREADS) mv_phase_advance() {
  Ctx* c = const_cast<Ctx*>(&mv_ctx);
  MV_FOR(e, c->n_exp) advance_exp(c, e);
}
