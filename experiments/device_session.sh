#!/usr/bin/env bash
# The GPU measurements of docs/performance.md as named steps, each under its own time limit, run
# from the repository root on a machine with an NVIDIA GPU; logs and JSON go under $OUT/STEP/.
#
#   MVOPT_COMMIT=$(git rev-parse --short HEAD) bash experiments/device_session.sh tests,bench_a
#
# A remote call lasts at most 600 s, so split the steps over calls (the limits below say how long
# each may take). `multi` needs two GPUs; `optimizer` needs optuna, installed from wheels in .whl/
# when that folder exists. MVOPT_COMMIT names the commit in the JSON (a copy of the working tree may
# carry an older .git). Afterwards copy the JSON a table reads into experiments/results/gpu/, named
# by that commit (experiments/report_gpu.py says which), and run `python experiments/report_gpu.py`.
# Steps that rewrite a section of docs/performance.md themselves copy it back to $OUT/STEP/.
#
# Steps:
#   tests          the GPU engine tests (GPU_TESTS=all: with the long random one)
#   stress_groups  random batches of the groups launch mode against the CPU (stress_groups_gpu.py)
#   bench_a        workload (a) at 64 MiB and the idle window (the headline figures)
#   bench          workloads (a), (b), (c), the idle window and the CPU/GPU identity batch
#   multi          workloads (a) and (b) on one GPU and on two (bench_multi_gpu.py)
#   profile        profile_gpu.py: the launch modes PROFILE_MODES side by side, the idle window per mode
#   ab             an older tree (./alt_old, carried along) beside this one, alternating AB_ROUNDS times
#   ncu_groups     Nsight Compute on one launch of the groups kernel, per source line and structure
#   wide           time per window and per event of a 128-port spine's thread (diag_wide_switch.py)
#   concurrency    paper Fig. 13 --run: that many 128-GPU training iterations in one batch
#   train54k       build the 53,760-GPU training experiment and simulate it for TRAIN54K_BUDGET_S
#   scaled54k      its DP 140 version for SCALED54K_WINDOWS windows on the GPU, then on every core
#   spme           paper Fig. 3/10 on the GPU (SPME_N x SPME_MIB; SPME_MODES / SPME_MERGE to split
#                  the modes over calls: save $OUT/spme/modes.json, copy it here, merge it later)
#   ablation       paper Fig. 16: pull vs locks on the GPU
#   optimizer      bench_optimizer.py, one generation of 1,000 trials per backend in OPT_BACKENDS
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
steps=${1:-tests,bench_a}
run() {  # name seconds command...
  local name=$1 secs=$2; shift 2
  case ",$steps," in *",$name,"*) ;; *) return 0 ;; esac
  mkdir -p "$OUT/$name"
  echo "== $name (limit ${secs}s) $(date -u +%H:%M:%S)"
  timeout "$secs" "$@" > "$OUT/$name/log.txt" 2>&1
  echo "   rc=$? ; last lines:"; tail -4 "$OUT/$name/log.txt" | sed 's/^/   /'
}
nvidia-smi -L
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target .site .whl/*.whl \
    && export PYTHONPATH=$PWD/.site:$PYTHONPATH
fi
run tests 300 python3 -m pytest -q -x -p no:cacheprovider tests/engine --durations=25 \
  -k "gpu$([ "${GPU_TESTS:-}" = all ] || echo ' and not many_random')"
run stress_groups ${STRESS_LIMIT:-240} python3 experiments/stress_groups_gpu.py --seconds ${STRESS_SECONDS:-180}
run bench_a 200 python3 experiments/bench_gpu.py --out "$OUT/bench_a" --sections a,idle --batches 2048,4096 \
  --cpu-batches 256 --cc none --mib 64 --budget-s 160
run bench 330 python3 experiments/bench_gpu.py --out "$OUT/bench" --sections identity,idle,a,b,c \
  --batches ${BENCH_BATCHES:-2048,4096} --cpu-batches 256 --cc none --mib 64 --b-mib 0.25 --b-max 1200 --budget-s 250
run multi 200 python3 experiments/bench_multi_gpu.py --out "$OUT/multi" --a-batch 2048 --a-mib 16 --b-mib 0.25 --b-count 2800
run profile ${PROFILE_LIMIT:-300} python3 experiments/profile_gpu.py --out "$OUT/profile" --workload ${PROFILE_WORKLOAD:-a} \
  --mib ${PROFILE_MIB:-8} --batch ${PROFILE_BATCH:-4096} --modes ${PROFILE_MODES:-groups,graph}
# make the older tree here with `git worktree add -f alt_old REV` and carry alt_old to the device
run ab ${AB_LIMIT:-400} bash -c "for i in \$(seq ${AB_ROUNDS:-2}); do for tree in old new; do
  (cd \$([ \$tree = old ] && echo alt_old || echo .) && PYTHONPATH=\$PWD python3 experiments/profile_gpu.py \
     --out $OUT/ab/\${tree}_\$i --mib 8 --batch 4096 --modes ${AB_MODES:-groups} --no-idle); done; done"
# ncu's per-line tables need the kernel's source, which CuPy keeps only in a fresh cache, and its
# line table (profile_gpu.py --ncu-once compiles with -lineinfo)
run ncu_groups 200 bash -c "rm -rf .ncu_cache; CUPY_CACHE_DIR=$PWD/.ncu_cache CUPY_CACHE_SAVE_CUDA_SOURCE=1 \
  MVOPT_GPU_LAUNCH=groups ncu --clock-control none --section SpeedOfLight \
  --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats \
  --section SourceCounters --section InstructionStats --import-source yes --source-folders $PWD/.ncu_cache \
  -k mv_run_groups --launch-skip ${NCU_GROUPS_SKIP:-2} -c 1 -f \
  -o $OUT/ncu_groups/prof python3 experiments/profile_gpu.py --ncu-once --mib 64 --batch ${NCU_GROUPS_BATCH:-2048} --iters 2000 \
  && ncu --import $OUT/ncu_groups/prof.ncu-rep --page details > $OUT/ncu_groups/details.txt \
  && python3 experiments/ncu_source_lines.py $OUT/ncu_groups/prof.ncu-rep $OUT/ncu_groups/lines.json \
  && python3 experiments/ncu_source_lines.py --by-structure $OUT/ncu_groups/lines.json > $OUT/ncu_groups/by_structure.txt \
  && python3 experiments/ncu_source_lines.py --by-function $OUT/ncu_groups/lines.json > $OUT/ncu_groups/by_function.txt"
run wide 240 python3 experiments/diag_wide_switch.py --backend gpu --batches ${WIDE_BATCHES:-1,16,200} --mib ${WIDE_MIB:-2}
run concurrency 300 bash -c "python3 experiments/paper_concurrency.py --run --run-slots ${CONC_SLOTS:-compact} --gpus ${CONC_GPUS:-128} \
  --workloads ${CONC_WORKLOADS:-rail-training} --cc dcqcn --mib 64 --memory-gib 141 --reserve-gib 4 \
  --run-max ${CONC_MAX:-2048} --run-budget-s ${CONC_BUDGET_S:-90} && cp docs/performance.md $OUT/concurrency/"
run train54k 560 env MVOPT_54K_BUDGET_S=${TRAIN54K_BUDGET_S:-120} python3 experiments/bench_taskgraph_54k.py --no-write \
  --cases rail_run --out "$OUT/train54k/taskgraph_54k_run.json"
run scaled54k 400 bash -c "for be in gpu cpu; do MVOPT_54K_BACKEND=\$be MVOPT_54K_CPU_THREADS=\$(nproc) \
  MVOPT_54K_WINDOWS=${SCALED54K_WINDOWS:-4000} python3 experiments/bench_taskgraph_54k.py --no-write --cases scaled_run \
  --out $OUT/scaled54k/taskgraph_54k_scaled_run_\$be.json | grep -A3 '^| case | backend'; done"
run spme ${SPME_LIMIT:-170} bash -c "python3 experiments/paper_spme_vs_process.py --backend gpu --n ${SPME_N:-32} \
  --mib ${SPME_MIB:-4,32} --cc none,dcqcn,hpcc,dctcp --jobs 16 ${SPME_MODES:+--modes $SPME_MODES} \
  --save $OUT/spme/modes.json ${SPME_MERGE:+--merge $SPME_MERGE} && cp docs/performance.md $OUT/spme/"
# one large experiment (--k) is left out: alone on the GPU it is paced by its slowest node's thread
run ablation 120 bash -c "python3 experiments/paper_ablation_pull.py --backend gpu --batch ${ABLATION_BATCH:-1024} --mib 4 --k 0 \
  --repeats 3 && cp docs/performance.md $OUT/ablation/"
if [ -d .whl ]; then
  # stacks every 60 s in the log show where a generation spends its time if the step runs out
  run optimizer ${OPT_LIMIT:-400} bash -c "for be in ${OPT_BACKENDS:-auto}; do python3 -c \"import faulthandler, runpy, sys; faulthandler.dump_traceback_later(60, repeat=True)
sys.argv = ['bench_optimizer.py', '--backend', '\$be', '--generation', '1000', '--generations', '${OPT_GENERATIONS:-1}', '--small',
            '--small-bytes', '${OPT_SMALL_BYTES:-2097152}', '--out', '$OUT/optimizer']
runpy.run_path('experiments/bench_optimizer.py', run_name='__main__')\"; done; cp docs/performance.md $OUT/optimizer/"
fi
echo "done $(date -u +%H:%M:%S)"
