"""Is anisotropy learned? QM9 pre-trainings of AniDS (Algorithm 1, PaiNN demo, 64 molecules per step, lr 4e-4,
sigma_p 0.1: the shipped checkpoints' recipe, unclipped, but without the envelope on b_ij, as Eq. 15) over lambda_KL and
the Gamma hinge, one row at a time.

Each finished row leaves its checkpoint under --ckpt-dir and its results file --out/<row>.json, so
a stopped sweep is taken up again by running the same command: finished rows are skipped, a row that was stopped
starts again from its beginning. The anisotropy of each generator is measured afterwards by
`benchmarks/anisotropy_of_generators.py`.

    python benchmarks/pretrain_anisotropy_sweep.py --rows kl0.1 kl0.5 kl1.0 kl1.5 --threads 1
    python benchmarks/pretrain_anisotropy_sweep.py --rows hinge-strong long-kl1.0 --threads 1
"""
from __future__ import annotations
import argparse, json, shutil, sys, time, traceback
from pathlib import Path

ROWS = {  # name: TrainConfig settings over the shipped recipe (4250 steps x 64 molecules, lambda_gamma 1, kappa 0.3)
    "kl0.1": dict(lambda_kl=0.1),
    "kl0.5": dict(lambda_kl=0.5),
    "kl1.0": dict(lambda_kl=1.0),
    "kl1.5": dict(lambda_kl=1.5),
    # a stronger hinge than App. C's (lambda_gamma 1, kappa 0.3): pushes Gamma_i = sum_j gamma_ij up
    "hinge-strong": dict(lambda_kl=1.0, lambda_gamma=10.0, kappa=0.6),
    # four times the shipped length
    "long-kl1.0": dict(lambda_kl=1.0, steps=17000),
}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", nargs="+", choices=sorted(ROWS), required=True)
    p.add_argument("--steps", type=int, default=4250, help="steps of a row that names none (default 4250, as shipped)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-structures", type=int, default=None, help="a smaller QM9 (a dry run)")
    p.add_argument("--ckpt-dir", default="data/checkpoints/anisotropy_sweep")
    p.add_argument("--runs-dir", default="runs/anisotropy_sweep/runs")
    p.add_argument("--out", default="results/pretrain_anisotropy_sweep", help="a folder: one <row>.json per row")
    a = p.parse_args(argv)
    import torch
    torch.set_num_threads(a.threads)
    from anids.train.pretraining import pretrain, pretraining_sets
    sets = None
    for row in a.rows:
        ckpt_dir, out = Path(a.ckpt_dir) / row, Path(a.out) / f"{row}.json"
        if out.is_file() and Path(json.loads(out.read_text()).get("checkpoint") or "/nonexistent").is_file():
            print(f"{row}: done before, skipped", flush=True); continue
        settings = dict(ROWS[row])
        steps = settings.pop("steps", a.steps)
        run_dir = Path(a.runs_dir) / row
        if run_dir.exists(): shutil.rmtree(run_dir)   # a stopped row starts again (Algorithm 1 keeps no resumable state here)
        if sets is None: sets = pretraining_sets("qm9", a.max_structures, 500)
        t0 = time.time()
        print(f"{row}: {steps} steps x {a.batch_size}, {settings}", flush=True)
        try:
            r = pretrain("anids", budget="demo", steps=steps, batch_size=a.batch_size, seed=a.seed, threads=a.threads,
                         grad_clip=0.0, cutoff_envelope=False,   # Eq. 15 (the demo budget has the shipped ones' envelope)
                         out_dir=run_dir, checkpoint_dir=ckpt_dir, sets=sets, progress=False, **settings)
        except Exception as e:   # one failed row (a divergence) is a result too; the sweep goes on
            res = {"settings": settings, "steps": steps, "error": f"{type(e).__name__}: {e}",
                   "traceback": traceback.format_exc()[-2000:]}
        else:
            res = {"settings": settings, "steps": steps, "batch_size": a.batch_size, "seed": a.seed,
                   "checkpoint": r["checkpoint"], "train_time_s": r["train_time_s"],
                   "heldout_denoise_loss": r["heldout_denoise_loss"], "final": r["final"], "versions": r["versions"]}
        res.update(row=row, wall_s=time.time() - t0, units={"time": "s", "loss": "Algorithm 1 denoising loss (pooled L2)"})
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.tmp"); tmp.write_text(json.dumps(res, indent=1, default=str)); tmp.replace(out)
        print(f"{row}: {'error' if 'error' in res else 'done'} in {(time.time() - t0) / 60:.1f} min", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
