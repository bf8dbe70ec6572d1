// The Schedule system: task readiness and completion. Each host owns the tasks that start on
// it (readiness, start time) and the tasks that finish on it (finish time). A per-host binary
// heap orders its task events by (time, task id).
#pragma once

// ---- heap of task events per host, in heap_t/heap_task[node_heap_lo ...] -------------------
// An entry is (time, key) with key = 2 * task + kind (0: the task starts, 1: a delay task
// finishes), ordered by time, then task, then kind (as the reference orders task events).
MV_DEV bool heap_less(const Ctx* c, int64_t a, int64_t b) {
  return c->heap_t[a] < c->heap_t[b] || (c->heap_t[a] == c->heap_t[b] && c->heap_task[a] < c->heap_task[b]);
}
MV_DEV void heap_swap(Ctx* c, int64_t a, int64_t b) {
  int64_t t = c->heap_t[a]; c->heap_t[a] = c->heap_t[b]; c->heap_t[b] = t;
  int32_t k = c->heap_task[a]; c->heap_task[a] = c->heap_task[b]; c->heap_task[b] = k;
}
MV_DEV void heap_push(Ctx* c, int64_t v, int64_t t, int32_t task) {
  int64_t base = c->node_heap_lo[v];
  int64_t i = c->node_heap_n[v]++;
  c->heap_t[base + i] = t;
  c->heap_task[base + i] = task;
  while (i > 0) {
    int64_t parent = (i - 1) / 2;
    if (!heap_less(c, base + i, base + parent)) break;
    heap_swap(c, base + i, base + parent);
    i = parent;
  }
}
MV_DEV int64_t heap_top_t(const Ctx* c, int64_t v) {
  return c->node_heap_n[v] > 0 ? c->heap_t[c->node_heap_lo[v]] : MV_INF;
}
MV_DEV void heap_pop(Ctx* c, int64_t v) {
  int64_t base = c->node_heap_lo[v];
  int64_t n = --c->node_heap_n[v];
  heap_swap(c, base, base + n);
  int64_t i = 0;
  for (;;) {
    int64_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && heap_less(c, base + l, base + m)) m = l;
    if (r < n && heap_less(c, base + r, base + m)) m = r;
    if (m == i) break;
    heap_swap(c, base + i, base + m);
    i = m;
  }
}

// A task whose predecessors are all known becomes ready at its ready time (pushed as an event).
// `now`: the time of the event that made it ready (MV_INF: not an event's). A delay task ready
// at `now` starts at once: its finish event goes on the heap instead of a start event that the
// next turn of the host's loop would pop at `now` only to push that finish. Exact: starting a
// delay task pushes its finish and does nothing else, so it commutes with every other event at
// `now`, and the heap pops its events in (time, key) order whatever order they were pushed in.
// (A chain of compute tasks, the idle window's critical path, pays one heap round trip less
// per task.)
MV_DEV void task_try_ready(Ctx* c, int64_t v, int32_t k, int64_t now) {
  if (c->task_local_left[k] != 0 || c->task_remote_ps[k] < 0 || c->task_start_ps[k] >= 0) return;
  int64_t ready = mv_max(c->task_min_ps[k], mv_max(c->task_ready_max[k], c->task_remote_ps[k]));
  c->task_start_ps[k] = ready;   // marks the task as scheduled; its start event fires at `ready`
  if (ready == now && c->task_kind[k] != 0) heap_push(c, v, now + c->task_dur_ps[k], 2 * k + 1);
  else heap_push(c, v, ready, 2 * k);
}

// Task k finished at node v at time t: record it and release the successors that start here.
// Returns when a remote successor's host will learn of it (t + window), or MV_INF.
MV_DEV int64_t task_finished(Ctx* c, int64_t v, int32_t k, int64_t t) {
  int64_t notify = MV_INF;
  MV_STORE_SHARED(c->task_finish_ps[k], t);   // remote successors' hosts read it (schedule_node)
  c->node_tasks_done[v] += 1;
  if (t > c->node_last_ps[v]) c->node_last_ps[v] = t;
  for (int32_t i = c->task_succ_lo[k]; i < c->task_succ_hi[k]; ++i) {
    int32_t s = c->task_succ[i];
    if (c->task_src[s] != v) {   // remote successor: its own host pulls it in the schedule phase
      notify = t + c->exp_window_ps[c->node_exp[v]];
      continue;
    }
    c->task_local_left[s] -= 1;
    if (t > c->task_ready_max[s]) c->task_ready_max[s] = t;
    task_try_ready(c, v, s, t);
  }
  return notify;
}

// Schedule (per host, at the start of its window [T, T + W)): resolve remote predecessors that
// finished in earlier windows. It runs beside other nodes' windows, which may be writing finish
// times right now; those are all >= T (a window's events are at or after its start) and every
// earlier window's are < T, so "finished before T" is exactly what a separate schedule phase
// between windows would see: the result does not depend on the order of the nodes.
MV_DEV void schedule_node(Ctx* c, int64_t v) {
  if (c->node_remote_left[v] == 0) return;
  int64_t e = c->node_exp[v];
  int64_t w = c->exp_window_ps[e], T = c->exp_T_ps[e];
  int32_t left = 0;
  for (int32_t i = c->node_task_lo[v]; i < c->node_task_hi[v]; ++i) {
    int32_t k = c->node_remote_list[i];
    if (c->task_remote_ps[k] >= 0) continue;
    int64_t r = 0;
    bool all = true;
    for (int32_t j = c->task_pred_lo[k]; j < c->task_pred_hi[k]; ++j) {
      int64_t f = MV_LOAD_SHARED(c->task_finish_ps[c->task_pred[j]]);
      if (f >= T) { all = false; break; }   // not finished, or finishing in this window
      r = mv_max(r, f + w);
    }
    if (!all) { left += 1; continue; }
    c->task_remote_ps[k] = r;
    task_try_ready(c, v, k, MV_INF);
  }
  c->node_remote_left[v] = left;
}
