#!/usr/bin/env bash
# A longer QM9 pre-training (Algorithm 1, the shipped recipe: PaiNN demo, 64 molecules per step, lr 4e-4, sigma_p 0.1,
# gradients clipped at 10) of one noise method on one GPU with fast steps (TrainConfig.fast_step): STEPS steps, by
# default 42500, ten times the shipped checkpoints' 4250. Time it first: minutes ~ STEPS x (ms per step of
# bench_fast_step_pretrain_h200.json, captured, plus Lightning's share) / 60000, and keep it under `run`'s 10 minutes.
#
# The GPU machine has neither QM9 nor all of the package's needs. Carry the wheels (.whl/, see gpu_session.sh) and the
# QM9 geometry cache (data/cache/qm9_geometries.npz, 26 MiB, made here with qm9pack installed:
# python -c "from anids.data.pretrain_data import qm9_arrays; qm9_arrays()"):
#
#     run(command="METHOD=anids STEPS=42500 bash benchmarks/gpu_pretrain.sh", carry=[".whl", "data/cache"], timeout_s=600)
#
# Writes pretrain_qm9_painn_demo_<METHOD>.pt and .json (provenance, training curves, held-out denoising loss) and the
# log under $OUT (default runs/pretrain_long). DEVICE=cpu and MAX_STRUCTURES=N make a short dry run on a CPU.
set -o pipefail
OUT=${OUT:-runs/pretrain_long}
METHOD=${METHOD:-anids}
STEPS=${STEPS:-42500}
DEVICE=${DEVICE:-gpu}
mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1 && [ "$DEVICE" = gpu ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site:$PYTHONPATH || exit 1
fi
export PYTHONPATH=$PWD:$PYTHONPATH PYTHONUNBUFFERED=1
timeout 570 python3 - "$METHOD" "$STEPS" "$DEVICE" "$OUT" "${MAX_STRUCTURES:-}" <<'PY' 2>&1 | tee "$OUT/pretrain_$METHOD.log"
import sys, time, json
method, steps, device, out, max_structures = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
from anids.train.pretraining import pretrain
t0 = time.time()
r = pretrain(method, budget="demo", steps=steps, batch_size=64, grad_clip=10.0, device=device, fast_step=True, checkpoint_dir=out,
             out_dir="/tmp/anids_runs", progress=False, max_structures=int(max_structures) if max_structures else None)
print(json.dumps({k: r[k] for k in ("name", "steps", "batch_size", "n_train", "train_time_s", "wall_time_s",
                                    "heldout_denoise_loss", "final")}, indent=1, default=str))
print(f"{method}: {steps} steps in {r['train_time_s'] / 60:.1f} min of training ({(time.time() - t0) / 60:.1f} min in all)")
PY
