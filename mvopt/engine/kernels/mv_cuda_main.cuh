// GPU entry point: the megakernel. One cooperative launch runs many iterations; the three
// phases of an iteration are separated by grid-wide barriers. `running[parity]` counts the
// experiments still running after an iteration (the only atomic: it decides when to stop and
// never feeds into the simulation itself).
MV_GLOBAL void mv_run_coop(Ctx* c, int64_t max_iters, int64_t* out) {
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
