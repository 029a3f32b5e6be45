"""Train the matched-noise rows on ethanol with `anids-train`, one run at a time, each into `<runs>/<row>_seed<k>`.

A row is a fine-tuning noise with its pre-trained weights (the keys of `benchmarks/matched_noise.py`'s ROWS); every
run takes the `cpu-30min` recipe plus the settings given here (`--epochs`, `--scale-statistic`, ...). Finished runs
(a `metrics.json`) are skipped and a stopped one resumes from its last Lightning checkpoint, so a stopped sweep is
taken up again by running the same command. Seeds go in the outer loop, so a sweep cut short leaves whole seeds.

    python benchmarks/matched_noise_runs.py --rows dens_0.1 dens_0.14 denoisevae anids --epochs 150 \\
        --scale-statistic energy_std --runs runs/matched_energy_std --train train.xyz --test test_MD.xyz
    python benchmarks/matched_noise.py --train train.xyz --runs runs/matched_energy_std --all-from-runs \\
        --rows dens_0.1 dens_0.14 denoisevae anids --out results/matched_noise_ethanol_energy_std.json
"""
from __future__ import annotations
import argparse, subprocess, sys
from pathlib import Path

ROW_ARGS = {   # row key -> anids-train arguments over the recipe
    "none": ["--method", "none"],
    "dens_0.05": ["--method", "dens", "--sigma-p", "0.05", "--pretrained", "qm9"],
    "dens_0.07": ["--method", "dens", "--sigma-p", "0.07", "--pretrained", "qm9"],
    "dens_0.1": ["--method", "dens", "--sigma-p", "0.1", "--pretrained", "qm9"],
    "dens_0.14": ["--method", "dens", "--sigma-p", "0.14", "--pretrained", "qm9"],
    "denoisevae": ["--method", "denoisevae", "--pretrained", "qm9"],
    "anids-add": ["--method", "anids-add", "--pretrained", "qm9"],
    "anids": ["--method", "anids", "--pretrained", "qm9"],
    "anids_kl0.1": ["--method", "anids", "--pretrained",
                    "data/checkpoints/anisotropy_sweep/kl0.1/pretrain_qm9_painn_demo_anids.pt"],
}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", nargs="+", choices=sorted(ROW_ARGS), required=True)
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--train", required=True)
    p.add_argument("--test", required=True)
    p.add_argument("--runs", default="runs/matched", help="one folder <row>_seed<k> per run")
    p.add_argument("--recipe", default="cpu-30min")
    p.add_argument("--epochs", type=int, default=None, help="the recipe's when not given")
    p.add_argument("--scale-statistic", default=None, help="the recipe's (force_rms) when not given; energy_std: the authors' unit")
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    extra = (["--epochs", str(a.epochs)] if a.epochs else []) + (["--scale-statistic", a.scale_statistic] if a.scale_statistic else [])
    for seed in a.seeds:
        for row in a.rows:
            out = Path(a.runs) / f"{row}_seed{seed}"
            if (out / "metrics.json").is_file():
                print(f"{out}: done before, skipped", flush=True); continue
            again = (["--resume", "last"] if (out / "checkpoints" / "last.ckpt").is_file()
                     else ["--overwrite"] if out.exists() else [])
            cmd = ["anids-train", "--recipe", a.recipe, *ROW_ARGS[row], "--seed", str(seed), "--threads", str(a.threads),
                   "--train", a.train, "--test", a.test, "--out", str(out), *extra, *again]
            print(" ".join(cmd), flush=True)
            rc = subprocess.call(cmd)
            print(f"{out}: exit {rc}", flush=True)   # a failed run (a divergence) stays a result of its row; the sweep goes on
    return 0


if __name__ == "__main__":
    sys.exit(main())
