#!/usr/bin/env bash
# The GPU measurements of issues 4, 6, 7 and 8 as steps, each under its own time limit, logs and
# JSON under $OUT. A device call lasts at most 600 s, so run them in two calls, e.g.
#
#   bash experiments/device_session.sh tests,bench          # then, in a second call:
#   bash experiments/device_session.sh optimizer,profile
#
# on the `nvidia-h200` kind (`nvidia-h200-x2` for `multi`), carrying .whl (optuna, from
# ../shared/tools/device-wheels.sh) for the optimizer, wide and ncu_wide steps.
#
# Steps: tests (GPU test modules), lanes_tests (the GPU tests of the switch lanes and their
# variants, then the stress script), ab (an older tree's profile beside this one's, alternating:
# AB_VARIANTS, AB_ROUNDS), stress_groups (random batches of the groups launch mode
# against the CPU, experiments/stress_groups_gpu.py), lanes (switch lanes on the GPU: profiles of (a) under their variants
# and of (b)),
# serial (every GPU test and the 64 MiB bench with MVOPT_SWITCH_LANES=0), bench_a (bench_gpu a/idle), bench (bench_gpu a/b/c/idle), optimizer (bench_optimizer on
# the GPU; OPT_BACKENDS="gpu:0 gpu:0+cpu" runs both, one after the other), profile (launch modes and kernel variants), ncu (Nsight Compute on the graph
# mode's window kernel, steady state of workload (a)), ncu_groups (the same on the groups kernel), spme (paper Fig. 3/10 on the GPU, SPME_N x SPME_MIB MiB within SPME_LIMIT s: an SPME
# batch vs a process per experiment; docs/performance.md comes back in $OUT/spme), ablation (Fig. 16:
# pull vs locks on the GPU; docs/performance.md comes back in $OUT/ablation), multi (issue 8:
# bench_multi_gpu on two GPUs), wide (time per window and per event of a 128-port spine's thread,
# experiments/diag_wide_switch.py: batches 1, 16, 200), ncu_wide (Nsight Compute on that batch of
# 16, a window in its steady state), concurrency (Fig. 13 --run: that many 128-GPU training
# iterations in one batch, compact slots by default, for CONC_BUDGET_S seconds; docs/performance.md
# comes back in $OUT/concurrency), train54k (build the rail-sampled 53,760-GPU training experiment,
# ~3 min of CPU, and simulate it for $TRAIN54K_BUDGET_S seconds: a call of its own), scaled54k (its
# DP 140 version for $SCALED54K_WINDOWS windows on the GPU, then on every CPU core: side by side).
# MVOPT_NODE_ORDER=widest-first (or default) picks the GPU's node order for every step (results do
# not depend on it): run a step under both to compare.
# Set MVOPT_COMMIT to the commit you run (the device copy of the checkout keeps an older .git),
# so that the reports name it. Afterwards copy $OUT/*/*.json to experiments/results/gpu/, named by
# that commit, and run experiments/report_gpu.py here.
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
steps=${1:-tests,bench}
run() {  # name seconds command...
  local name=$1 secs=$2; shift 2
  case ",$steps," in *",$name,"*) ;; *) return 0 ;; esac
  mkdir -p "$OUT/$name"
  echo "== $name (limit ${secs}s) $(date -u +%H:%M:%S)"
  timeout "$secs" "$@" > "$OUT/$name/log.txt" 2>&1
  echo "   rc=$? ; last lines:"; tail -4 "$OUT/$name/log.txt" | sed 's/^/   /'
}
nvidia-smi -L
# optuna & co. (not on the device machine): the optimizer, wide and ncu_wide steps need them
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target .site .whl/*.whl \
    && export PYTHONPATH=$PWD/.site:$PYTHONPATH
fi
# the 300-example random test takes ~200 s of the GPU suite's ~220 s: GPU_TESTS=all to include it
run tests 300 python3 -m pytest -q -x -p no:cacheprovider tests/engine --durations=25 \
  -k "gpu$([ "${GPU_TESTS:-}" = all ] || echo ' and not many_random')"
# the groups launch mode against the CPU under random slicing, grids, budgets and node orders
run stress_groups ${STRESS_LIMIT:-240} python3 experiments/stress_groups_gpu.py --seconds ${STRESS_SECONDS:-180}
# switch lanes on the GPU (MV_SWITCH_LANES 2, the default: docs/engine.md "Switch lanes"): the GPU
# tests of its variants and of wide switches, the stress script, then (a) under the lanes'
# variants (LANES_VARIANTS; by default the twentieth session's defaults against the nineteenth's
# and each of the four changes alone) and (b),
# whose 32-port rail switches run port by port (LANES_B_VARIANTS)
# (the tests, ~25 s a kernel variant, and the stress script are a step of their own, lanes_tests:
# with the profiles they pass a call's 600 s)
run lanes_tests 560 bash -c "python3 -m pytest -q -p no:cacheprovider tests/engine -k 'gpu and (shortcut_variants or lanes or wide_switches)' \
  && python3 experiments/stress_groups_gpu.py --seconds ${STRESS_SECONDS:-40}"
run lanes 540 bash -c "python3 experiments/profile_gpu.py --out $OUT/lanes --mib 8 --batch 4096 \
       --variants ${LANES_VARIANTS:-groups,groups-defaults19,groups-nopool,groups-noscan,groups-port-major,groups-inline,groups,groups-defaults19,groups-nopool,groups-noscan,groups-port-major,groups-inline} --idle-variants none \
  && python3 experiments/profile_gpu.py --out $OUT/lanes_b --workload b --mib 0.25 --batch 1200 \
       --variants ${LANES_B_VARIANTS:-groups,groups-defaults19,groups,groups-defaults19} --idle-variants none"
# the serial switch windows ($MVOPT_SWITCH_LANES=0, the default until 745723f; the other launch
# modes' and every switch's fallback) as the whole pipeline's: every GPU test (the long random
# one aside), then the 64 MiB bench of (a), to set beside the default's
run serial 560 bash -c "MVOPT_SWITCH_LANES=0 python3 -m pytest -q -x -p no:cacheprovider tests/engine \
  -k 'gpu and not many_random' && MVOPT_SWITCH_LANES=0 python3 experiments/bench_gpu.py --out $OUT/serial \
  --sections a,idle --batches 4096 --cpu-batches 256 --cc none --mib 64 --budget-s 100"
run multi 200 python3 experiments/bench_multi_gpu.py --out $OUT/multi --a-batch 2048 --a-mib 16 --b-mib 0.25 --b-count 2800
run profile ${PROFILE_LIMIT:-190} python3 experiments/profile_gpu.py --out "$OUT/profile" --mib 8 --batch ${PROFILE_BATCH:-4096} \
  --variants ${PROFILE_VARIANTS:-graph,coop} ${PROFILE_IDLE:+--idle-variants $PROFILE_IDLE}
# an older tree beside this one, in processes of their own, alternating (AB_ROUNDS times): make
# it here with `git worktree add -f alt_old REV` (and /alt_old/ in .git/info/exclude), carry
# alt_old to the device, and name the variants to compare with AB_VARIANTS (default groups)
run ab ${AB_LIMIT:-400} bash -c "for i in \$(seq ${AB_ROUNDS:-2}); do for tree in old new; do
  (cd \$([ \$tree = old ] && echo alt_old || echo .) && PYTHONPATH=\$PWD python3 experiments/profile_gpu.py \
     --out $OUT/ab/\${tree}_\$i --mib 8 --batch 4096 --variants ${AB_VARIANTS:-groups} --idle-variants none); done; done"
# the kernel's source, kept in a fresh CuPy cache, is what ncu's per-line tables need (it compiles from a temporary file)
ncu_src="CUPY_CACHE_DIR=$PWD/.ncu_cache CUPY_CACHE_SAVE_CUDA_SOURCE=1"
run ncu 170 bash -c "rm -rf .ncu_cache; $ncu_src MVOPT_LINEINFO=1 MVOPT_GPU_LAUNCH=graph ncu --clock-control none --section SpeedOfLight \
  --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats \
  --section SourceCounters --section InstructionStats --import-source yes --source-folders $PWD/.ncu_cache \
  -k mv_phase_window --launch-skip 214 -c 1 -f \
  -o $OUT/ncu/prof python3 experiments/profile_gpu.py --ncu-once --mib 64 --batch 4096 --iters 160 \
  && ncu --import $OUT/ncu/prof.ncu-rep --page details > $OUT/ncu/details.txt \
  && (ncu --import $OUT/ncu/prof.ncu-rep --page source --csv --print-source cuda > $OUT/ncu/source_cuda.csv || true) \
  && python3 experiments/ncu_source_lines.py $OUT/ncu/prof.ncu-rep $OUT/ncu/lines.json"
# the same for the groups kernel (the default): one launch of slices of 16 windows of workload (a) in
# its steady state, NCU_GROUPS_BATCH experiments (more groups than resident blocks: slices taken in turns)
run ncu_groups 200 bash -c "rm -rf .ncu_cache; $ncu_src MVOPT_LINEINFO=1 MVOPT_GPU_LAUNCH=groups ncu --clock-control none --section SpeedOfLight \
  --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats \
  --section SourceCounters --section InstructionStats --import-source yes --source-folders $PWD/.ncu_cache \
  -k mv_run_groups --launch-skip ${NCU_GROUPS_SKIP:-2} -c 1 -f \
  -o $OUT/ncu_groups/prof python3 experiments/profile_gpu.py --ncu-once --mib 64 --batch ${NCU_GROUPS_BATCH:-2048} --iters 2000 \
  && ncu --import $OUT/ncu_groups/prof.ncu-rep --page details > $OUT/ncu_groups/details.txt \
  && python3 experiments/ncu_source_lines.py $OUT/ncu_groups/prof.ncu-rep $OUT/ncu_groups/lines.json \
  && python3 experiments/ncu_source_lines.py --by-structure $OUT/ncu_groups/lines.json > $OUT/ncu_groups/by_structure.txt \
  && python3 experiments/ncu_source_lines.py --by-function $OUT/ncu_groups/lines.json > $OUT/ncu_groups/by_function.txt"
# idle windows per launch mode, then the graph mode's window and advance kernels timed apart (CUDA events)
run launch 150 python3 experiments/diag_launch.py
run wide 240 python3 experiments/diag_wide_switch.py --backend gpu --batches ${WIDE_BATCHES:-1,16,200} --mib ${WIDE_MIB:-2}
run ncu_wide 200 bash -c "MVOPT_LINEINFO=1 MVOPT_GPU_LAUNCH=graph ncu --clock-control none --section SpeedOfLight \
  --section WarpStateStats --section LaunchStats --section SourceCounters --section InstructionStats --import-source yes \
  -k mv_phase_window --launch-skip 2000 -c 1 -f -o $OUT/ncu_wide/prof python3 experiments/diag_wide_switch.py \
  --batches 16 --mib 2 --orders default && ncu --import $OUT/ncu_wide/prof.ncu-rep --page details > $OUT/ncu_wide/details.txt \
  && (ncu --import $OUT/ncu_wide/prof.ncu-rep --page source --csv --print-source cuda > $OUT/ncu_wide/source_cuda.csv || true)"
run concurrency 300 bash -c "python3 experiments/paper_concurrency.py --run --run-slots ${CONC_SLOTS:-compact} --gpus ${CONC_GPUS:-128} \
  --workloads ${CONC_WORKLOADS:-rail-training} --run-max ${CONC_MAX:-4096} --run-budget-s ${CONC_BUDGET_S:-120} \
  && cp docs/performance.md $OUT/concurrency/"
run train54k 560 env MVOPT_54K_BUDGET_S=${TRAIN54K_BUDGET_S:-200} python3 experiments/bench_taskgraph_54k.py --no-write \
  --cases rail_run --out "$OUT/train54k/taskgraph_54k_run.json"
# the DP 140 training experiment (17,920 GPUs, ~16 GB) for the same windows on the GPU and on all CPU cores
run scaled54k 400 bash -c "for be in gpu cpu; do MVOPT_54K_BACKEND=\$be MVOPT_54K_CPU_THREADS=\$(nproc) \
  MVOPT_54K_WINDOWS=${SCALED54K_WINDOWS:-6000} python3 experiments/bench_taskgraph_54k.py --no-write --cases scaled_run \
  --out $OUT/scaled54k/taskgraph_54k_scaled_run_\$be.json | grep -A3 '^| case | backend'; done"
# SPME_MODES runs some modes only (saved to $OUT/spme/modes.json); SPME_MERGE names a modes.json of an earlier call
# (copied into the checkout) to merge with: for sizes whose modes do not fit one call (128 x 32 MiB)
run spme ${SPME_LIMIT:-170} bash -c "python3 experiments/paper_spme_vs_process.py --backend gpu --n ${SPME_N:-128} --mib ${SPME_MIB:-4} \
  --jobs 16 ${SPME_MODES:+--modes $SPME_MODES} --save $OUT/spme/modes.json ${SPME_MERGE:+--merge $SPME_MERGE} \
  && cp docs/performance.md $OUT/spme/"
# (b), one large experiment, is left out (--k 0): alone on the GPU it is paced by its slowest node thread,
# and k=16 did not finish its three variants in 130 s (59d8db8)
run ablation 120 bash -c "python3 experiments/paper_ablation_pull.py --backend gpu --batch 1024,4096 --mib 4 --k 0 \
  --repeats 3 && cp docs/performance.md $OUT/ablation/"
# workload (a) and the idle window alone (the throughput target's figure, ~110 s)
run bench_a 200 python3 experiments/bench_gpu.py --out "$OUT/bench_a" --sections a,idle --batches 2048,4096 \
  --cpu-batches 256 --cc none --mib 64 --budget-s 160
run bench 330 python3 experiments/bench_gpu.py --out "$OUT/bench" --sections identity,idle,a,b,c \
  --batches ${BENCH_BATCHES:-1024,4096} --cpu-batches 256 --cc none --mib 64 --b-mib 0.25 --b-max 1200 --budget-s 250
if [ -d .whl ]; then
  # stacks every 60 s in the log: where a generation spends its time if the step runs out
  # OPT_BACKENDS (space-separated) run one after another, side by side; OPT_GENERATIONS each
  run optimizer ${OPT_LIMIT:-400} bash -c "for be in ${OPT_BACKENDS:-gpu:0}; do python3 -c \"import faulthandler, runpy, sys; faulthandler.dump_traceback_later(60, repeat=True)
sys.argv = ['bench_optimizer.py', '--backend', '\$be', '--generation', '1000', '--generations', '${OPT_GENERATIONS:-2}', '--small',
            '--small-bytes', '${OPT_SMALL_BYTES:-2097152}', '--out', '$OUT/optimizer']
runpy.run_path('experiments/bench_optimizer.py', run_name='__main__')\"; done; cp docs/performance.md $OUT/optimizer/"
fi
echo "done $(date -u +%H:%M:%S)"
