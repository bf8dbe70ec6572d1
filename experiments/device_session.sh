#!/usr/bin/env bash
# One device-machine call that runs the GPU measurements still owed (issues 4, 6, 7, 8), most
# important first, each under its own time limit, logs and JSON under $OUT. Meant for the
# `nvidia-h200-x2` kind (two GPUs; the one-GPU steps use GPU 0), carrying .whl (optuna, from
# ../shared/tools/device-wheels.sh) for the optimizer step:
#
#   bash experiments/device_session.sh [STEPS]      # STEPS: comma list, default all in order
#
# Steps: tests (GPU test modules), multi (issue 8: diag + bench_multi_gpu), profile (kernel and
# launch variants), ncu (Nsight Compute on the default kernel: speed of light, memory, warp
# states), bench (bench_gpu a/b/c/idle), optimizer (bench_optimizer on the GPU).
# Afterwards copy $OUT/*/*.json to experiments/results/gpu/ (named by commit) and run
# experiments/report_gpu.py here.
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
steps=${1:-tests,multi,profile,bench,optimizer}
run() {  # name seconds command...
  local name=$1 secs=$2; shift 2
  case ",$steps," in *",$name,"*) ;; *) return 0 ;; esac
  mkdir -p "$OUT/$name"
  echo "== $name (limit ${secs}s) $(date -u +%H:%M:%S)"
  timeout "$secs" "$@" > "$OUT/$name/log.txt" 2>&1
  echo "   rc=$? ; last lines:"; tail -4 "$OUT/$name/log.txt" | sed 's/^/   /'
}
nvidia-smi -L
# (the device copy of the checkout may not carry the commit: name the result files by the commit you ran)
run tests 200 python3 -m pytest -q -p no:cacheprovider tests/engine/test_gpu_launch.py tests/engine/test_plan.py \
  tests/engine/test_batch.py tests/engine/test_engine.py -k "gpu or plan or batch or launch"
run multi 200 python3 experiments/bench_multi_gpu.py --out $OUT/multi --a-batch 2048 --a-mib 16 --b-mib 0.25 --b-count 2800
run profile 190 python3 experiments/profile_gpu.py --out "$OUT/profile" --mib 8 --batch ${PROFILE_BATCH:-4096} \
  --variants ${PROFILE_VARIANTS:-async,coop,graph,minblocks4}
run ncu 150 bash -c "MVOPT_LINEINFO=1 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
  --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats --section SourceCounters \
  -k mv_run_async --launch-skip 1 -c 1 -f -o $OUT/ncu/prof python3 experiments/profile_gpu.py --ncu-once --batch 1024 --iters 300 \
  && ncu --import $OUT/ncu/prof.ncu-rep --page details > $OUT/ncu/details.txt"
run bench 330 python3 experiments/bench_gpu.py --out "$OUT/bench" --sections identity,idle,a,b,c \
  --batches 1024,4096 --cpu-batches 256 --cc none --mib 64 --b-mib 0.25 --b-max 1200 --budget-s 250
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target .site .whl/*.whl \
    && export PYTHONPATH=$PWD/.site:$PYTHONPATH
  run optimizer 200 python3 experiments/bench_optimizer.py --backend gpu:0 --generation 1000 --generations 1 \
    --out "$OUT/optimizer"
fi
echo "done $(date -u +%H:%M:%S)"
