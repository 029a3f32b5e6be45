"""Epoch times of a whole `anids-train` run: the eager step, the fixed-shape step and the compiled one, side by side.

    python benchmarks/bench_compile_step.py --train train.xyz --test test_MD.xyz --threads 1 2 \\
        --out results/bench_compile_step_cpu.json

Each way is one `anids-train` run of `--recipe` (default `cpu-30min`: PaiNN demo, batches of 8, AniDS from the shipped
QM9 generator, frozen, its covariances cached) for `--epochs` epochs on the same data and seed: `eager` (the default
step), `fixed` (`--fast-step true`) and `compiled` (`--fast-step true --compile-step true`, whose first epoch compiles).
An epoch's time is Lightning's, as the run records it (`metrics.json` `epoch_times_s`: the training steps with the
optimiser, the weight average, the logging and the validation pass). Written: every epoch's seconds, the median of the
epochs after the first, its ratio to eager, and the test force MAE each run reached (the three should agree to the
spread of a few epochs: the compiled step draws its noise from inductor's random numbers, not torch's)."""
from __future__ import annotations
import argparse, json, statistics, subprocess, sys, tempfile
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
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    res = {}
    with tempfile.TemporaryDirectory() as tmp:
        for threads in a.threads:
            for way, extra in WAYS.items():
                out = Path(tmp) / f"{way}_{threads}"
                cmd = ["anids-train", "--recipe", a.recipe, "--method", a.method, "--threads", str(threads),
                       "--epochs", str(a.epochs), "--train", a.train, "--test", a.test, "--progress", "false",
                       "--out", str(out), *(["--pretrained", a.pretrained] if a.pretrained else []), *extra]
                subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
                m = json.loads((out / "metrics.json").read_text())
                t = m["epoch_times_s"]
                res[f"{way}, {threads} thread{'s' if threads > 1 else ''}"] = {
                    "epoch_times_s": t, "median_after_first_s": statistics.median(t[1:]), "threads": threads,
                    "test_force_mae_meV_A": m["test"]["force_mae_meV_A"], "command": " ".join(cmd)}
            base = res[f"eager, {threads} thread{'s' if threads > 1 else ''}"]["median_after_first_s"]
            for way in WAYS:
                r = res[f"{way}, {threads} thread{'s' if threads > 1 else ''}"]
                r["over_eager"] = r["median_after_first_s"] / base
                print(f"{way:9s} {threads} thread(s): {r['median_after_first_s']:.2f} s per epoch after the first "
                      f"({r['over_eager']:.2f} x eager; first {r['epoch_times_s'][0]:.1f} s), test force MAE "
                      f"{r['test_force_mae_meV_A']:.2f} meV/A", flush=True)
    if a.out:
        from anids.provenance import versions
        doc = {"description": __doc__.strip().splitlines()[0], "recipe": a.recipe, "method": a.method,
               "pretrained": a.pretrained, "epochs": a.epochs, "train": a.train, "test": a.test,
               "ratios": {f"{k} over eager": r["over_eager"] for k, r in res.items() if not k.startswith("eager")},
               "rows": [{"case": k, **{f: r[f] for f in ("threads", "median_after_first_s", "over_eager", "test_force_mae_meV_A")},
                         "first_epoch_s": r["epoch_times_s"][0]} for k, r in res.items()],
               "results": res,
               "versions": versions("torch", "lightning")}
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
