#!/usr/bin/env bash
# The GPU measurements of the fast training step (anids.train.fast) in one command, for a machine that has PyTorch with
# CUDA but not all of the package's other needs: those travel as wheels in .whl/ (ase, vesin, vesin-torch, fastcore,
# downloaded for the machine's Python 3.12 with
#     pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#         --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d .whl ase vesin==0.6.2 vesin-torch==0.6.2 fastcore
# Run from the repository root:
#
#     OUT=/some/dir bash benchmarks/gpu_session.sh        # default OUT: results/; parts 1-4
#     PARTS="5 6" bash benchmarks/gpu_session.sh          # parts 5-6 (periodic cells), in a second call
#     PARTS="7" bash benchmarks/gpu_session.sh            # part 7 (TF32), about 2 minutes
#
# Parts 1-4 write four results files and their logs under $OUT (8 files, as many as `run` brings back): at most about
# 9 minutes (each part has a timeout), so that `run` with timeout_s=600 returns them. Parts 5-6 take at most about 8.5 minutes.
set -o pipefail
OUT=${OUT:-results}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site:$PYTHONPATH || exit 1
fi
export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv   # also in each JSON (benchmarks/_env.py)
python3 -c "import torch, anids.train.fast; assert torch.cuda.is_available(), 'torch sees no GPU'; print('torch', torch.__version__, 'cuda', torch.version.cuda)" || exit 1
# each part writes its JSON after every method, so a part stopped by its timeout keeps what it measured
PARTS=${PARTS:-1 2 3 4}
part() { [[ " $PARTS " == *" $1 "* ]]; }
# 1. cpu-30min (PaiNN demo, batches of 8 ethanols): steps, epochs, whole fits, checks, profiles
part 1 && timeout 200 python3 benchmarks/bench_fast_step.py --device cuda --methods none anids --steps 50 --warmup 10 \
    --epochs 2 --fit-epochs 3 --profile --out "$OUT/bench_fast_step_h200.json" 2>&1 | tee "$OUT/bench_fast_step.log"
# 2. Algorithm 1 as the shipped QM9 pre-training runs it (PaiNN demo, batches of 64), on the eight bundled molecules
#    (9-21 atoms, padded to 21) as a stand-in for QM9
part 2 && timeout 100 python3 benchmarks/bench_fast_step.py --device cuda --recipe pretrain --molecule all --n 3200 --batch-size 64 \
    --methods dens anids --steps 30 --warmup 5 --epochs 1 --out "$OUT/bench_fast_step_pretrain_h200.json" 2>&1 \
    | tee "$OUT/bench_fast_step_pretrain.log"
# 3. rmd17-paper (EquiformerV2 L=3, 2 aspirins per step), psi trained jointly as the paper's cost table
part 3 && timeout 120 python3 benchmarks/bench_fast_step.py --device cuda --recipe rmd17-paper --molecule aspirin --n 50 \
    --pretrained '' --train-generator true --methods none anids --steps 20 --warmup 3 --epochs 1 \
    --out "$OUT/bench_fast_step_rmd17_h200.json" 2>&1 | tee "$OUT/bench_fast_step_rmd17.log"
# 4. Algorithm 1 at the PCQM4Mv2 scale (EquiformerV2 L=3, 40 molecules per step), bundled molecules padded to 21 atoms
part 4 && timeout 130 python3 benchmarks/bench_fast_step.py --device cuda --recipe pretrain-paper --molecule all --n 800 \
    --methods anids --steps 20 --warmup 3 --epochs 1 --out "$OUT/bench_fast_step_pretrain_paper_h200.json" 2>&1 \
    | tee "$OUT/bench_fast_step_pretrain_paper.log"
# 5. mptrj (GeoMFormer, 40 periodic cells of 16-40 atoms per step, padded to 40 slots, neighbour lists with a 1 A skin),
#    psi trained jointly as the recipe; made-up cells (bench_recipe_steps.mptrj_like)
part 5 && timeout 150 python3 benchmarks/bench_fast_step.py --device cuda --recipe mptrj --n 400 --pretrained '' \
    --methods none anids --steps 20 --warmup 3 --epochs 1 --out "$OUT/bench_fast_step_mptrj_h200.json" 2>&1 \
    | tee "$OUT/bench_fast_step_mptrj.log"
#    ... and with batches drawn from 4 groups of similar size (--size-buckets: one fixed-shape set and CUDA graph each)
part 5 && timeout 150 python3 benchmarks/bench_fast_step.py --device cuda --recipe mptrj --n 400 --pretrained '' --size-buckets 4 \
    --methods none anids --steps 20 --warmup 3 --epochs 1 --out "$OUT/bench_fast_step_mptrj_buckets_h200.json" 2>&1 \
    | tee "$OUT/bench_fast_step_mptrj_buckets.log"
# 6. oc22 without noise (EquiformerV2 122M, two 82-atom slabs per step; at most 20 neighbours within 12 A, which the
#    fast step keeps on the device from neighbour lists at 13 A)
part 6 && timeout 200 python3 benchmarks/bench_fast_step.py --device cuda --recipe oc22 --n 40 --pretrained '' \
    --methods none --steps 20 --warmup 3 --epochs 1 --out "$OUT/bench_fast_step_oc22_h200.json" 2>&1 \
    | tee "$OUT/bench_fast_step_oc22.log"
# 7. rmd17-paper as part 3 with TF32 matrix products (--matmul-precision high): the time it saves, and the fixed step's
#    loss and gradients against the eager one's at that precision (the checks in the JSON)
part 7 && timeout 120 python3 benchmarks/bench_fast_step.py --device cuda --recipe rmd17-paper --molecule aspirin --n 50 \
    --pretrained '' --train-generator true --methods none anids --steps 20 --warmup 3 --epochs 1 --matmul-precision high \
    --out "$OUT/bench_fast_step_rmd17_tf32_h200.json" 2>&1 | tee "$OUT/bench_fast_step_rmd17_tf32.log"
true
