"""Algorithm 1 on one size bucket of QM9: the eager step of a git revision against this checkout's compiled step, in
fresh processes that alternate, round after round. A steadier comparison than `bench_fast_step.py --baseline`, which
runs each side once, one after the other, on batches drawn from random buckets: on a machine whose speed drifts by
10-15 % within minutes, alternating sides shows the drift instead of folding it into the ratio.

    python benchmarks/bench_bucket_alternated.py --baseline 0f6571e --rounds 3 \\
        --out results/bench_compile_step_pretrain_qm9_bucket19_alternated_cpu.json

Each side is the path of `bench_fast_step.py` (`eager`: the step of `anids.train.fit` on collated batches and radius
graphs; `compiled`: `FastStep(compiled=True)`), on the first QM9 training molecules of `--atoms` atoms (default 17-19:
19 atom slots, the largest bucket of `--size-buckets 8`), `--batch-size` per step, the median of `--steps` steps after
`--warmup`. The revision's side runs its own code (a temporary git worktree, its `anids` and its `bench_fast_step.py`)."""
from __future__ import annotations
import argparse, json, os, statistics, subprocess, sys, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from _revisions import worktree   # noqa: E402


def child(kind: str, method: str, atoms: tuple[int, int], batch_size: int, warmup: int, steps: int, threads: int) -> dict:
    "One side, in this process: the median milliseconds of a training step (the code on sys.path: this checkout's or REV's)."
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch
    sys.path.insert(0, os.environ.get("ANIDS_BENCH_DIR", str(HERE)))   # the bench_fast_step.py of the code measured
    from dataclasses import replace
    from bench_fast_step import Groups, Path_, recipe_config
    from anids.train import prepare_training
    from anids.data.pretrain_data import load_qm9
    torch.set_num_threads(threads)
    lo, hi = atoms
    mols = [m for m in load_qm9(split="train", max_structures=20000, progress=False) if lo <= m.num_nodes <= hi][:10 * batch_size]
    if len(mols) < 2 * batch_size: raise SystemExit(f"only {len(mols)} QM9 molecules of {lo}-{hi} atoms in the first 20000")
    cfg = replace(recipe_config("pretrain", method=method, seed=0, progress=False), batch_size=batch_size)
    torch.manual_seed(0)
    module, cfg, train, _ = prepare_training(mols, cfg, None)
    groups = Groups(train, module, cfg, torch.device("cpu"), 1)
    path = Path_(kind, module, cfg, train, groups, torch.device("cpu"), groups.steps_per_epoch)
    gen = torch.Generator().manual_seed(0)
    def forever():
        while True: yield from path.batches(groups, gen)
    it, times = forever(), []
    for k in range(warmup + steps):
        b = next(it)
        t0 = time.perf_counter()
        path.step(b)
        if k >= warmup: times.append(time.perf_counter() - t0)
    return {"kind": kind, "ms_per_step": 1000 * statistics.median(times), "min_ms": 1000 * min(times),
            "max_ms": 1000 * max(times), "molecules": len(mols), "slots": groups.sets[0].slots}


def run_side(kind: str, a, code: Path) -> dict:
    "One side in a fresh process, on the code checked out at `code` (this checkout or a worktree)."
    env = dict(os.environ, PYTHONPATH=str(code) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               ANIDS_BENCH_DIR=str(code / "benchmarks"))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", kind, "--method", a.method, "--atoms", *map(str, a.atoms),
           "--batch-size", str(a.batch_size), "--warmup", str(a.warmup), "--steps", str(a.steps), "--threads", str(a.threads)]
    out = subprocess.run(cmd, cwd=code, env=env, capture_output=True, text=True)
    line = next((l for l in out.stdout.splitlines() if l.startswith("RESULT ")), None)
    if out.returncode != 0 or line is None:
        raise SystemExit(f"the {kind} side at {code} failed:\n{(out.stdout + out.stderr)[-3000:]}")
    return json.loads(line[len("RESULT "):])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", default="0f6571e", metavar="REV", help="the revision whose eager step is the reference")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--method", default="anids")
    ap.add_argument("--atoms", type=int, nargs=2, default=(17, 19), metavar=("LO", "HI"), help="molecules of LO-HI atoms (default 17 19)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--child", choices=("eager", "compiled"), default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=Path("results/bench_compile_step_pretrain_qm9_bucket_alternated_cpu.json"))
    a = ap.parse_args(argv)
    if a.child:
        print("RESULT " + json.dumps(child(a.child, a.method, tuple(a.atoms), a.batch_size, a.warmup, a.steps, a.threads)), flush=True)
        return
    if a.rounds < 1: raise SystemExit("--rounds must be at least 1")
    sys.path.insert(0, str(HERE))
    import torch
    torch.set_num_threads(a.threads)   # as the sides run: the environment recorded below then says so
    from _env import environment, load_warning
    before = environment()
    rounds = []
    with worktree(a.baseline) as (tree, full):
        for k in range(a.rounds):
            old, new = run_side("eager", a, tree), run_side("compiled", a, ROOT)
            rounds.append({"eager_at_baseline": old, "compiled_now": new, "ratio": new["ms_per_step"] / old["ms_per_step"]})
            print(f"round {k + 1}: eager at {full[:7]} {old['ms_per_step']:.1f} ms/step, compiled now {new['ms_per_step']:.1f}: "
                  f"{rounds[-1]['ratio']:.2f}", flush=True)
    old = statistics.median(r["eager_at_baseline"]["ms_per_step"] for r in rounds)
    new = statistics.median(r["compiled_now"]["ms_per_step"] for r in rounds)
    after = environment()
    out = {"benchmark": f"bench_bucket_alternated pretrain, molecules of {a.atoms[0]}-{a.atoms[1]} atoms",
           "ratios": {f"{a.method}: compiled / eager at {full[:7]}, ms per step (medians over rounds)": new / old},
           "method": a.method, "baseline_revision": full, "batch_size": a.batch_size, "atoms": list(a.atoms),
           "steps": a.steps, "warmup_steps": a.warmup, "threads": a.threads, "rounds": rounds,
           "median_eager_at_baseline_ms": old, "median_compiled_now_ms": new,
           "environment_before": before, "environment_after": after}
    warn = load_warning(before, after)
    if warn: print(warn); out["load_warning"] = warn
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"median over {a.rounds} rounds: eager at {full[:7]} {old:.1f} ms/step, compiled now {new:.1f} ms/step: {new / old:.2f}; wrote {a.out}")


if __name__ == "__main__":
    main()
