"""Algorithm 1 on one size bucket of QM9: the eager step of a git revision against this checkout's compiled step, in
fresh processes that alternate, round after round. A steadier comparison than `bench_fast_step.py --baseline`, which
runs each side once, one after the other, on batches drawn from random buckets: on a machine whose speed drifts by
10-15 % within minutes, alternating sides shows the drift instead of folding it into the ratio.

    python benchmarks/bench_bucket_alternated.py --baseline 0f6571e --rounds 3 \\
        --out results/bench_compile_step_pretrain_qm9_bucket19_alternated_cpu.json
    python benchmarks/bench_bucket_alternated.py --baseline 0f6571e --rounds 3 --size-buckets 8 --n 3200 \\
        --out results/bench_compile_step_pretrain_qm9_buckets8_alternated_cpu.json

Each side is the path of `bench_fast_step.py` (`eager`: the step of `anids.train.fit` on collated batches and radius
graphs; `compiled`: `FastStep(compiled=True)`), on the first QM9 training molecules of `--atoms` atoms (default 17-19:
19 atom slots, the largest bucket of `--size-buckets 8`), `--batch-size` per step, the median of `--steps` steps after
`--warmup`. With `--size-buckets K` each side trains instead on the first `--n` QM9 training molecules in K size buckets,
as a run draws them (`bench_fast_step.py --size-buckets`): one untimed epoch (every bucket's step compiled), then
`--epochs` timed epochs, each step's milliseconds (median) and each epoch's seconds (median), and the milliseconds per
structure trained (an epoch's seconds over its whole batches' structures: the sides' code may cut the size groups
differently, and so train different numbers of whole batches an epoch). The revision's side runs its own code (a
temporary git worktree, its `anids` and its `bench_fast_step.py`)."""
from __future__ import annotations
import argparse, json, os, statistics, subprocess, sys, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from _revisions import worktree   # noqa: E402


def child(kind: str, method: str, atoms: tuple[int, int], batch_size: int, warmup: int, steps: int, threads: int,
          buckets: int = 1, n: int = 3200, epochs: int = 1) -> dict:
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
    if buckets > 1: mols = load_qm9(split="train", max_structures=n, progress=False)
    else: mols = [m for m in load_qm9(split="train", max_structures=20000, progress=False) if lo <= m.num_nodes <= hi][:10 * batch_size]
    if len(mols) < 2 * batch_size:
        raise SystemExit(f"only {len(mols)} QM9 molecules" + (f" (--n {n})" if buckets > 1 else f" of {lo}-{hi} atoms in the first 20000"))
    cfg = replace(recipe_config("pretrain", method=method, seed=0, progress=False), batch_size=batch_size)
    torch.manual_seed(0)
    module, cfg, train, _ = prepare_training(mols, cfg, None)
    groups = Groups(train, module, cfg, torch.device("cpu"), buckets)
    path = Path_(kind, module, cfg, train, groups, torch.device("cpu"), groups.steps_per_epoch)
    gen = torch.Generator().manual_seed(0)
    if buckets > 1:   # whole epochs: the first untimed (a compiled side compiles each bucket's step there)
        for b in path.batches(groups, gen): path.step(b)
        times, epoch_s = [], []
        for _ in range(epochs):
            t_epoch = time.perf_counter()
            for b in path.batches(groups, gen):
                t0 = time.perf_counter()
                path.step(b)
                times.append(time.perf_counter() - t0)
            epoch_s.append(time.perf_counter() - t_epoch)
        return {"kind": kind, "ms_per_step": 1000 * statistics.median(times), "min_ms": 1000 * min(times),
                "max_ms": 1000 * max(times), "s_per_epoch": statistics.median(epoch_s), "all_epoch_s": epoch_s,
                "steps_per_epoch": groups.steps_per_epoch, "molecules": len(mols), "slots": [fs.slots for fs in groups.sets]}
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
           "--batch-size", str(a.batch_size), "--warmup", str(a.warmup), "--steps", str(a.steps), "--threads", str(a.threads),
           "--size-buckets", str(a.size_buckets), "--n", str(a.n), "--epochs", str(a.epochs)]
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
    ap.add_argument("--size-buckets", type=int, default=1, help="> 1: the first --n QM9 molecules in this many size buckets, whole epochs")
    ap.add_argument("--n", type=int, default=3200, help="QM9 training molecules with --size-buckets (default 3200)")
    ap.add_argument("--epochs", type=int, default=1, help="timed epochs per side with --size-buckets, after an untimed one (default 1)")
    ap.add_argument("--child", choices=("eager", "compiled"), default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=Path("results/bench_compile_step_pretrain_qm9_bucket_alternated_cpu.json"))
    a = ap.parse_args(argv)
    if a.child:
        print("RESULT " + json.dumps(child(a.child, a.method, tuple(a.atoms), a.batch_size, a.warmup, a.steps, a.threads,
                                           a.size_buckets, a.n, a.epochs)), flush=True)
        return
    if a.rounds < 1: raise SystemExit("--rounds must be at least 1")
    if a.size_buckets < 1 or a.epochs < 1: raise SystemExit("--size-buckets and --epochs must be at least 1")
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
            if a.size_buckets > 1:
                rounds[-1]["ratio_per_epoch"] = new["s_per_epoch"] / old["s_per_epoch"]
                # the sides may cut the groups differently (SizeBuckets changed at 0f6571e..): an epoch of whole batches
                # then trains a different number of structures, and the time per structure trained compares them
                for side in (old, new): side["ms_per_structure"] = 1000 * side["s_per_epoch"] / (side["steps_per_epoch"] * a.batch_size)
                rounds[-1]["ratio_per_structure"] = new["ms_per_structure"] / old["ms_per_structure"]
            print(f"round {k + 1}: eager at {full[:7]} {old['ms_per_step']:.1f} ms/step, compiled now {new['ms_per_step']:.1f}: "
                  f"{rounds[-1]['ratio']:.2f}" + (f"; per epoch {old['s_per_epoch']:.2f} s ({old['steps_per_epoch']} steps), "
                                                   f"{new['s_per_epoch']:.2f} s ({new['steps_per_epoch']}): {rounds[-1]['ratio_per_epoch']:.2f}; "
                                                   f"per structure trained {rounds[-1]['ratio_per_structure']:.2f}" if a.size_buckets > 1 else ""), flush=True)
    old = statistics.median(r["eager_at_baseline"]["ms_per_step"] for r in rounds)
    new = statistics.median(r["compiled_now"]["ms_per_step"] for r in rounds)
    after = environment()
    what = (f"the first {a.n} QM9 molecules in {a.size_buckets} size buckets" if a.size_buckets > 1
            else f"molecules of {a.atoms[0]}-{a.atoms[1]} atoms")
    out = {"benchmark": f"bench_bucket_alternated pretrain, {what}",
           "ratios": {f"{a.method}: compiled / eager at {full[:7]}, ms per step (medians over rounds)": new / old},
           "method": a.method, "baseline_revision": full, "batch_size": a.batch_size, "threads": a.threads,
           **({"size_buckets": a.size_buckets, "n": a.n, "epochs": a.epochs} if a.size_buckets > 1 else
              {"atoms": list(a.atoms), "steps": a.steps, "warmup_steps": a.warmup}),
           "rounds": rounds, "median_eager_at_baseline_ms": old, "median_compiled_now_ms": new,
           "environment_before": before, "environment_after": after}
    if a.size_buckets > 1:
        old_e = statistics.median(r["eager_at_baseline"]["s_per_epoch"] for r in rounds)
        new_e = statistics.median(r["compiled_now"]["s_per_epoch"] for r in rounds)
        out["ratios"][f"{a.method}: compiled / eager at {full[:7]}, s per epoch (medians over rounds)"] = new_e / old_e
        out.update(median_eager_at_baseline_s_per_epoch=old_e, median_compiled_now_s_per_epoch=new_e)
        old_m = statistics.median(r["eager_at_baseline"]["ms_per_structure"] for r in rounds)
        new_m = statistics.median(r["compiled_now"]["ms_per_structure"] for r in rounds)
        out["ratios"][f"{a.method}: compiled / eager at {full[:7]}, ms per structure trained (medians over rounds)"] = new_m / old_m
        out.update(median_eager_at_baseline_ms_per_structure=old_m, median_compiled_now_ms_per_structure=new_m)
        print(f"per epoch, median over {a.rounds} rounds: eager at {full[:7]} {old_e:.2f} s, compiled now {new_e:.2f} s: {new_e / old_e:.2f}; "
              f"per structure trained {old_m:.2f} ms, {new_m:.2f} ms: {new_m / old_m:.2f}")
    warn = load_warning(before, after)
    if warn: print(warn); out["load_warning"] = warn
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"median over {a.rounds} rounds: eager at {full[:7]} {old:.1f} ms/step, compiled now {new:.1f} ms/step: {new / old:.2f}; wrote {a.out}")


if __name__ == "__main__":
    main()
