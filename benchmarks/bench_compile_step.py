"""Epoch times of a whole `anids-train` run: the eager step, the fixed-shape step and the compiled one, side by side.

    python benchmarks/bench_compile_step.py --train train.xyz --test test_MD.xyz --threads 1 2 \\
        --out results/bench_compile_step_cpu.json

Each way is one `anids-train` run of `--recipe` (default `cpu-30min`: PaiNN demo, batches of 8, AniDS from the shipped
QM9 generator, frozen, its covariances cached) for `--epochs` epochs on the same data and seed: `eager` (the default
step), `fixed` (`--fast-step true`) and `compiled` (`--fast-step true --compile-step true`, whose first epoch compiles).
An epoch's time is Lightning's, as the run records it (`metrics.json` `epoch_times_s`: the training steps with the
optimiser, the weight average, the logging and the validation pass). Written: every epoch's seconds, the median of the
epochs after the first, its ratio to eager, and the test force MAE each run reached (the three should agree to the
spread of a few epochs: the compiled step draws its noise from inductor's random numbers, not torch's).

`--wait-policies passive active`: with more than one thread, every way also runs with the OpenMP threads spinning while
they wait for work (`OMP_WAIT_POLICY=ACTIVE`) rather than sleeping (`PASSIVE`, what `import anids` sets unless the
environment says otherwise). The compiled step is many short parallel regions, and on a quiet CPU a sleeping thread
wakes too late for each; on a CPU shared with other busy processes spinning threads take their cores. A way's ratio
compares it with eager under the same policy (`over_eager`) and with eager under the first policy given
(`over_eager_first_policy`)."""
from __future__ import annotations
import argparse, json, os, statistics, subprocess, sys, tempfile
from pathlib import Path

WAYS = {"eager": [], "fixed": ["--fast-step", "true"], "compiled": ["--fast-step", "true", "--compile-step", "true"]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", required=True)
    p.add_argument("--test", required=True)
    p.add_argument("--recipe", default="cpu-30min")
    p.add_argument("--method", default="anids")
    p.add_argument("--pretrained", default="qm9", help="'' for none")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--threads", type=int, nargs="+", default=[1])
    p.add_argument("--wait-policies", nargs="+", default=["passive"], choices=("passive", "active"),
                   help="OMP_WAIT_POLICY of the runs with more than one thread (one thread: the first)")
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        for threads in a.threads:
            first = None
            for policy in a.wait_policies if threads > 1 else a.wait_policies[:1]:
                case = f"{threads} thread{'s' if threads > 1 else ''}" + (", threads spin" if policy == "active" else "")
                env = dict(os.environ, OMP_WAIT_POLICY=policy.upper())
                for way, extra in WAYS.items():
                    out = Path(tmp) / f"{way}_{threads}_{policy}"
                    cmd = ["anids-train", "--recipe", a.recipe, "--method", a.method, "--threads", str(threads),
                           "--epochs", str(a.epochs), "--train", a.train, "--test", a.test, "--progress", "false",
                           "--out", str(out), *(["--pretrained", a.pretrained] if a.pretrained else []), *extra]
                    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
                    m = json.loads((out / "metrics.json").read_text())
                    t = m["epoch_times_s"]
                    res[f"{way}, {case}"] = {
                        "epoch_times_s": t, "median_after_first_s": statistics.median(t[1:]), "threads": threads,
                        "omp_wait_policy": policy.upper(), "test_force_mae_meV_A": m["test"]["force_mae_meV_A"],
                        "command": f"OMP_WAIT_POLICY={policy.upper()} " + " ".join(cmd)}
                base = res[f"eager, {case}"]["median_after_first_s"]
                first = first or base
                for way in WAYS:
                    r = res[f"{way}, {case}"]
                    r["over_eager"], r["over_eager_first_policy"] = r["median_after_first_s"] / base, r["median_after_first_s"] / first
                    print(f"{way:9s} {case}: {r['median_after_first_s']:.2f} s per epoch after the first "
                          f"({r['over_eager']:.2f} x eager, {r['over_eager_first_policy']:.2f} x eager {a.wait_policies[0]}; "
                          f"first {r['epoch_times_s'][0]:.1f} s), test force MAE {r['test_force_mae_meV_A']:.2f} meV/A", flush=True)
    if a.out:
        from anids.provenance import versions
        doc = {"description": __doc__.strip().splitlines()[0], "recipe": a.recipe, "method": a.method,
               "pretrained": a.pretrained, "epochs": a.epochs, "train": a.train, "test": a.test,
               "ratios": {f"{k} over eager": r["over_eager"] for k, r in res.items() if not k.startswith("eager")},
               "rows": [{"case": k, **{f: r[f] for f in ("threads", "omp_wait_policy", "median_after_first_s", "over_eager",
                                                         "over_eager_first_policy", "test_force_mae_meV_A")},
                         "first_epoch_s": r["epoch_times_s"][0]} for k, r in res.items()],
               "results": res,
               "versions": versions("torch", "lightning")}
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
