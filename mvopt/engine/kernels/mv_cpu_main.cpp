// CPU entry points: the phases as parallel loops (OpenMP when available); a loop end is the
// barrier between phases. Compiled with MV_BACKEND_CPU after the generated struct Ctx.
MV_GLOBAL int64_t mv_run(Ctx* c, int64_t max_iters) {
  int64_t it = 0;
  for (; it < max_iters; ++it) {
    MV_FOR(v, c->n_node) schedule_phase_node(c, v);
    MV_FOR(v, c->n_node) network_node(c, v);
    MV_FOR(e, c->n_exp) advance_exp(c, e);
    int64_t running = 0;
    for (int64_t e = 0; e < c->n_exp; ++e) running += c->exp_status[e] == ST_RUN;
    if (running == 0) { ++it; break; }
  }
  return it;
}
MV_GLOBAL int64_t mv_sizeof_pkt() { return (int64_t)sizeof(Pkt); }
MV_GLOBAL int64_t mv_sizeof_int() { return (int64_t)sizeof(IntHop); }
