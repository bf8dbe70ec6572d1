// CPU entry points (OpenMP when available): a batch of one experiment shares its nodes among the
// threads, window after window (mv_run); a batch of several gives each thread whole experiments
// (mv_run_by_experiment). Compiled with MV_BACKEND_CPU after the generated struct Ctx. `lanes`:
// whether a switch's window may run port by port (node_window; 0: the serial loop only, as the
// GPU's graph kernel runs it).
// One window of a batch of one experiment, its nodes shared by the threads: each thread also
// reduces the reports of the nodes it ran (minima and sums: the result does not depend on who
// reduces what), then one advances the experiment. advance_exp instead has one thread read every
// node's row, just written by the other threads: a serial pass per window, which bounds how
// much many cores can gain on one large experiment.
static void mv_step_one(Ctx* c, bool lanes) {
  int64_t next = MV_INF, prog = MV_INF, done = 0, acked = 0;
#ifdef _OPENMP
  #pragma omp parallel for schedule(dynamic, 16) num_threads(mv_nthreads) reduction(min: next, prog) reduction(+: done, acked)
#endif
  for (int64_t v = 0; v < c->n_node; ++v) {
    node_window(c, v, lanes);
    fold_report(c, v, &next, &prog, &done, &acked);
  }
  advance_with(c, 0, next, prog, done, acked);
}

// A batch of one experiment (the host calls mv_run_by_experiment for several): up to max_iters
// windows; returns the windows run, the one in which the experiment ended included.
MV_GLOBAL int64_t mv_run(Ctx* c, int64_t max_iters, int64_t threads, int64_t lanes) {
#ifdef _OPENMP
  mv_nthreads = threads > 0 ? (int)threads : 1;
#endif
  int64_t it = 0;
  for (; it < max_iters; ++it) {
    if (c->exp_status[0] == ST_RUN) mv_step_one(c, lanes != 0);
    if (c->exp_status[0] != ST_RUN) { ++it; break; }
  }
  return it;
}
MV_GLOBAL int64_t mv_sizeof_pkt() { return (int64_t)sizeof(Pkt); }
MV_GLOBAL int64_t mv_sizeof_int() { return (int64_t)sizeof(IntHop); }

// Experiment-major order for the CPU: experiments are independent, so each thread runs whole
// experiments from start to end (the same phases in the same order, restricted to the
// experiment's nodes) and keeps one experiment's state hot in its cache. Results are the
// experiment's alone (mv_run's); the GPU, which needs the parallelism of all nodes at once, runs
// every node's window, then every experiment's advance.
static int64_t mv_run_one(Ctx* c, int64_t e, int64_t max_iters, bool lanes) {
  int64_t lo = c->exp_node_lo[e], hi = c->exp_node_hi[e], it = 0;
  for (; it < max_iters && c->exp_status[e] == ST_RUN; ++it) {
    for (int64_t v = lo; v < hi; ++v) node_window(c, v, lanes);
    advance_exp(c, e);
  }
  return it;
}

// `order`: the experiments in the order threads take them (the host puts the costliest first, so
// that the last to start is a short one: longest-processing-time-first scheduling).
MV_GLOBAL int64_t mv_run_by_experiment(Ctx* c, int64_t max_iters, int64_t threads, int64_t lanes,
                                       const int64_t* order) {
  int64_t most = 0;
#ifdef _OPENMP
  #pragma omp parallel for schedule(dynamic, 1) num_threads((int)(threads > 0 ? threads : 1)) reduction(max: most)
#endif
  for (int64_t i = 0; i < c->n_exp; ++i) {
    int64_t it = mv_run_one(c, order[i], max_iters, lanes != 0);
    if (it > most) most = it;
  }
  return most;
}
