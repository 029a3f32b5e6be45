"""MD stability of a MACE model, in MACE's own environment (mace-torch pins e3nn 0.4.4, anids needs a newer e3nn):

    /path/mace-venv/bin/python benchmarks/md_stability_mace.py --model runs/mace_s0 --data test_MD.xyz \
        --starts 12 345 678 --temperatures 300 500 --n-runs 3 --time-ps 1 --out mace_study.json

Runs `anids.analysis.md_stability.stability_study` (Langevin runs per temperature, one NVE run) with MACE's ASE calculator and
writes the study (settings, every run with its bond-length samples, the NVE drift) to `--out` as JSON.
`anids.analysis.md_stability` imports only numpy, scipy, ase and tqdm, so it is imported from this checkout without
installing anids (or torch_geometric, lightning, a newer e3nn) into MACE's environment. nbs/md_stability.ipynb
calls this script with the same starting frames, seed and settings as its in-process runs of the anids models.

`--model` is a MACE model file, or the directory of a `mace_run_train` run, where `run_stagetwo.model` (the
SWA stage's model, what benchmarks/compare_mace.py evaluates) is taken, else `run.model`.
"""
import argparse, hashlib, json, os, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def resolve_model(path) -> Path:
    path = Path(path)
    if path.is_dir():
        for name in ("run_stagetwo.model", "run.model"):
            if (path / name).is_file(): return path / name
        raise FileNotFoundError(f"no run_stagetwo.model or run.model in the MACE training directory {path}")
    if not path.is_file(): raise FileNotFoundError(f"no MACE model at {path}")
    return path


def sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""): h.update(block)
    return h.hexdigest()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="MACE model file or mace_run_train directory")
    p.add_argument("--data", required=True, help="ASE-readable frames: the starting structures are taken from here")
    p.add_argument("--starts", type=int, nargs="+", required=True, help="indices of the starting frames")
    p.add_argument("--bond-frame", type=int, default=0, help="frame whose covalent bonds are watched")
    p.add_argument("--temperatures", type=float, nargs="+", default=[300.0, 500.0])
    p.add_argument("--n-runs", type=int, default=3)
    p.add_argument("--time-ps", type=float, default=1.0)
    p.add_argument("--timestep-fs", type=float, default=0.5)
    p.add_argument("--friction-per-fs", type=float, default=0.01)
    p.add_argument("--nve-ps", type=float, default=0.5)
    p.add_argument("--nve-temperature", type=float, default=300.0)
    p.add_argument("--sample-every", type=int, default=10)
    p.add_argument("--discard-ps", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--out", required=True, help="JSON file for the study")
    a = p.parse_args(argv)

    import torch
    torch.set_num_threads(a.threads)
    sys.path.insert(0, str(ROOT))
    from ase.io import read
    from anids.analysis.md_stability import covalent_bonds, stability_study
    from mace.calculators import MACECalculator
    import ase, mace

    model = resolve_model(a.model)
    if not Path(a.data).is_file(): raise FileNotFoundError(f"no data file at {a.data}")
    frames = read(a.data, ":")
    bad = [i for i in [*a.starts, a.bond_frame] if not 0 <= i < len(frames)]
    if bad: raise ValueError(f"frame indices {bad} out of range: {a.data} has {len(frames)} frames")
    calc = MACECalculator(model_paths=str(model), device="cpu", default_dtype=a.dtype)
    t0 = time.perf_counter()
    study = stability_study(calc, [frames[i] for i in a.starts], temperatures=a.temperatures, n_runs=a.n_runs,
                            time_ps=a.time_ps, timestep_fs=a.timestep_fs, seed=a.seed, friction_per_fs=a.friction_per_fs,
                            nve_ps=a.nve_ps, nve_temperature_K=a.nve_temperature, sample_every=a.sample_every,
                            discard_ps=a.discard_ps, bonds=covalent_bonds(frames[a.bond_frame]), progress=False,
                            log=lambda s: print(s, flush=True))
    out = dict(study=study, model=str(model), model_sha256=sha256(model), dtype=a.dtype, threads=a.threads,
               start_indices=a.starts, bond_frame=a.bond_frame, data=str(a.data), wall_time_s=time.perf_counter() - t0,
               versions={"mace": mace.__version__, "torch": torch.__version__, "ase": ase.__version__,
                         "python": sys.version.split()[0]},
               env={k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")})
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out))
    print(f"wrote {a.out} ({out['wall_time_s']:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
