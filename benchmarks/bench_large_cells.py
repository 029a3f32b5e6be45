"""Big periodic cells: time and peak memory of Sigma_i (`model.covariance`) and of energy, forces and stress
(`model.predict(compute_stress=True)`), with edges in chunks (the default) and without, from 10^3 to 10^5 atoms.

    nice -n 10 python benchmarks/bench_large_cells.py                      # 10^3 ... 10^5 atoms, ~15 min on 1 thread
    python benchmarks/bench_large_cells.py --sizes 1000 3000 --max-unchunked 3000   # a quick look
    nice -n 10 python benchmarks/bench_large_cells.py --backbone equiformer_v2 --tasks both   # EquiformerV2 (mptrj)
    nice -n 10 python benchmarks/bench_large_cells.py --backbone geomformer --tasks both      # GeoMFormer (mptrj)
    nice -n 10 python benchmarks/bench_large_cells.py --backbone equiformer --tasks both      # Equiformer (md17)

The structures are rattled Si diamond supercells, `ase.build.bulk("Si", cubic=True).repeat(r)` with the repeats of
SIZES (1 000, 3 072, 10 368, 30 720 and 100 000 atoms, 28 neighbours per atom within 5 A), rattled by 0.05 A (seed
0), float32. The model is `build_model("painn", preset="demo", method="anids", seed=0)` in eval mode (untrained: only
time and memory are measured): a 3-block PaiNN denoiser with 64 features and a 2-block PaiNN generator encoder.

Every (size, path, task) runs in a fresh Python process, one at a time, with one thread (OMP_NUM_THREADS=1,
OMP_WAIT_POLICY=PASSIVE) and niceness 10. Its peak memory is `resource.getrusage(RUSAGE_SELF).ru_maxrss`, the peak
resident set of that process, and `baseline_MB` is the same number just before the timed call (Python, torch, the
model, the structure, and a warm-up call on a 216-atom cell so that one-time costs are not timed: about 0.45 GB).
Tasks:

* `covariance`: `model.covariance(data)` as a user calls it (autograd on, the result keeps its graph);
* `predict`: `model.predict(data, compute_stress=True)` (the neighbour list, energy, forces and stress);
* `both`: the two in one process (Sigma_i first, then energy, forces, stress): the peak of a whole prediction.

Paths: `chunked` is the default (`anids.nn.graphs.DEFAULT_EDGE_CHUNK_SIZE` edges per chunk in eval mode);
`unchunked` is `model.set_edge_chunk_size(None)`, the code before chunking. The unchunked path runs only up to
`--max-unchunked` atoms (it needs about 5 GB at 10^4 atoms); a chunked size is skipped when a linear fit of the
peaks of the previous sizes predicts more than `--max-rss-gb`. Where both paths ran, their energies, forces, stresses and
Sigma_i are compared (float32, so agreement to rounding, not to 1e-10; the float64 identity is a test in
nbs/nn/04_painn.ipynb, nbs/method/01_noise.ipynb and nbs/method/04_model.ipynb).

`--backbone geomformer` measures the MPtrj GeoMFormer recipe (`mptrj` in anids.train): `build_model("geomformer",
preset="mptrj", generator_preset="mptrj_generator", method="anids", force_mode="conservative", seed=0)`, a 6-layer,
128-channel denoiser whose forces and stress are gradients of the energy, and a 2-layer GeoMFormer generator encoder;
cutoff 5 A (28 neighbours and a self-loop per atom). Chunked, its attentions run over whole neighbourhoods a chunk at a
time; the atom-wise tensors ([N, 3, 128] per layer) are kept for the backward pass on both paths. Sizes 128 ... 3000
atoms, unchunked up to 512; results/bench_large_cells_geomformer.json.

`--backbone equiformer` measures the MD17 Equiformer (`md17` preset, L_max = 2, 6 blocks, with the `generator`
Equiformer encoder; conservative forces and stress; cutoff 5 A) on the same cells, 128 ... 3000 atoms, unchunked up
to 216: a molecular backbone, measured here for the large molecules and clusters users put through it;
results/bench_large_cells_equiformer.json.

`--backbone equiformer_v2` measures the MPtrj EquiformerV2 recipe instead (`mptrj-eqv2` in anids.train):
`build_model("equiformer_v2", preset="mptrj", generator_preset="mptrj_generator", method="anids",
force_mode="direct", direct_stress=True, seed=0)`: an 8-block, L_max = 4, 128-channel denoiser with direct forces and
a direct stress head, and a 2-block EquiformerV2 generator encoder; cutoff 12 A with the 20 nearest neighbours (20
edges per atom). Its sizes are smaller (128 ... 1000 atoms by default): the unchunked path keeps about 1.4 MB per edge
for the backward pass (`predict` runs with autograd on, the weights require gradients), and one thread does about
70 atoms per CPU second. Its warm-up is the 8-atom cell with 64-edge chunks (so both paths are warmed up without the
216-atom cell's unchunked peak), and it writes results/bench_large_cells_equiformer_v2.json.

With `--no-grad` the measured calls run as a user who only reads the numbers runs them: `model.covariance` under
`torch.no_grad()`, and `predict` under `torch.set_grad_enabled(model.needs_autograd(True, True))`, the mode of
`AniDSCalculator` and `anids.train.evaluate` (autograd only where forces and stress are gradients of the energy: on for
conservative PaiNN, off for EquiformerV2's direct forces and stress head). The result file gets the suffix `_nograd`.

With `--malloc-mmap-threshold B` the workers run with glibc's `MALLOC_MMAP_THRESHOLD_=B`. By default glibc serves blocks
below a threshold that it raises up to 32 MB as big blocks are freed from its heap, which it seldom gives back to
the system: many short-lived blocks of a few MB (a chunk's per-edge tensors) between long-lived ones make the peak
resident memory grow well beyond what is alive. A fixed threshold (e.g. 1 MB) maps such blocks and unmaps them when
freed: the peak then follows the live memory, at the cost of system time (page faults).

Prints a table and linear fits (time and peak memory against atoms: slope, intercept, R^2, and the exponent of a
log-log fit, 1 for linear scaling), and writes results/bench_large_cells.json with the machine, its load before and
after, the threads and package versions (benchmarks/_env.py). CPU seconds (`time.process_time`) are reported next
to wall seconds: on a shared machine the wall time of a one-thread process grows with the load, its CPU time much
less.
"""
from __future__ import annotations
import argparse, json, os, resource, subprocess, sys, tempfile, time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OMP_NUM_THREADS", "1")
import numpy as np   # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

SIZES = {128: (2, 2, 4), 216: (3, 3, 3), 512: (4, 4, 4), 1000: (5, 5, 5), 3000: (8, 8, 6), 10000: (12, 12, 9),
         30000: (16, 16, 15), 100000: (25, 25, 20)}
"Nominal size -> repeats of the 8-atom cubic Si cell (8 * product atoms)."
TASKS = ("covariance", "predict", "both")
BACKBONES = {
    "painn": dict(model=dict(backbone="painn", preset="demo", method="anids", seed=0),
                  sizes=[1000, 3000, 10000, 30000, 100000], max_unchunked=11000, warmup=dict(repeat=(3, 3, 3), chunk=None),
                  out="bench_large_cells.json",
                  description="PaiNN demo (AniDS generator) on rattled Si supercells: Sigma_i, and energy + forces + stress, "
                              "chunked (default) and unchunked, one fresh process per run, 1 thread, float32"),
    "equiformer_v2": dict(model=dict(backbone="equiformer_v2", preset="mptrj", generator_preset="mptrj_generator",
                                     method="anids", force_mode="direct", direct_stress=True, seed=0),
                          sizes=[128, 216, 512, 1000], max_unchunked=216, warmup=dict(repeat=(1, 1, 1), chunk=64),
                          out="bench_large_cells_equiformer_v2.json",
                          description="EquiformerV2 mptrj (direct forces and stress, EquiformerV2 generator) on rattled Si "
                                      "supercells: Sigma_i, and energy + forces + stress, chunked (default) and unchunked, "
                                      "one fresh process per run, 1 thread, float32"),
    "equiformer": dict(model=dict(backbone="equiformer", preset="md17", generator_preset="generator", method="anids",
                                  force_mode="conservative", seed=0),
                       sizes=[128, 216, 512, 1000, 3000], max_unchunked=216, warmup=dict(repeat=(1, 1, 1), chunk=64),
                       out="bench_large_cells_equiformer.json",
                       description="Equiformer md17 (conservative forces and stress, Equiformer generator) on rattled Si "
                                   "supercells: Sigma_i, and energy + forces + stress, chunked (default) and unchunked, one "
                                   "fresh process per run, 1 thread, float32"),
    "geomformer": dict(model=dict(backbone="geomformer", preset="mptrj", generator_preset="mptrj_generator",
                                  method="anids", force_mode="conservative", seed=0),
                       sizes=[128, 216, 512, 1000, 3000], max_unchunked=512, warmup=dict(repeat=(1, 1, 1), chunk=64),
                       out="bench_large_cells_geomformer.json",
                       description="GeoMFormer mptrj (conservative forces and stress, GeoMFormer generator) on rattled Si "
                                   "supercells: Sigma_i, and energy + forces + stress, chunked attention (default) and "
                                   "unchunked, one fresh process per run, 1 thread, float32"),
}
"What `--backbone` measures: build_model's arguments, default sizes and unchunked limit, warm-up, output file."


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024   # Linux: kB


def worker(spec: dict) -> dict:
    "One measurement in this (fresh) process; returns a JSON-able record."
    os.nice(spec.get("nice", 10))
    import torch
    torch.set_num_threads(1)
    from ase.build import bulk
    from anids.method.model import build_model
    from anids.data.structures import atoms_batch
    from anids.nn.graphs import radius_graph
    cfg = BACKBONES[spec.get("backbone", "painn")]
    atoms = bulk("Si", cubic=True).repeat(tuple(spec["repeat"]))
    atoms.rattle(0.05, seed=0)
    model = build_model(**cfg["model"]).eval()
    if spec["path"] == "unchunked": model.set_edge_chunk_size(None)
    data = atoms_batch([atoms])
    # warm-up (PaiNN: a 216-atom cell, 6 048 edges: both paths run; EquiformerV2: the 8-atom cell, chunked in 64-edge
    # chunks on the chunked path), so that one-time costs are not timed
    small = bulk("Si", cubic=True).repeat(cfg["warmup"]["repeat"])
    small.rattle(0.05, seed=1)
    chunk = model.denoiser.edge_chunk_size
    if chunk is not None and cfg["warmup"]["chunk"] is not None: model.set_edge_chunk_size(cfg["warmup"]["chunk"])
    model.covariance(atoms_batch([small])); model.predict(atoms_batch([small]), compute_stress=True)
    model.set_edge_chunk_size(chunk)
    rec = dict(atoms=len(atoms), path=spec["path"], task=spec["task"], chunk=model.denoiser.edge_chunk_size,
               baseline_MB=round(_peak_mb(), 1))
    out = {}
    no_grad = spec.get("no_grad", False)
    rec["grad_mode"] = "as AniDSCalculator" if no_grad else "autograd on"
    if spec["task"] in ("covariance", "both"):
        t, c = time.perf_counter(), time.process_time()
        with torch.set_grad_enabled(not no_grad):
            cov = model.covariance(data)
        rec.update(covariance_s=time.perf_counter() - t, covariance_cpu_s=time.process_time() - c,
                   covariance_peak_MB=_peak_mb())
        out["sigma"] = cov.matrix.detach().numpy()
        del cov
    if spec["task"] in ("predict", "both"):
        t, c = time.perf_counter(), time.process_time()
        with torch.set_grad_enabled(model.needs_autograd(True, True) if no_grad else True):
            pred = model.predict(data, compute_stress=True)
        rec.update(predict_s=time.perf_counter() - t, predict_cpu_s=time.process_time() - c, predict_peak_MB=_peak_mb())
        out.update(energy=pred.energy.detach().numpy(), forces=pred.forces.detach().numpy(),
                   stress=pred.stress.detach().numpy())
        del pred
    rec["peak_MB"] = _peak_mb()
    rec["edges"] = radius_graph(data.pos, model.denoiser.cutoff, data.batch, data.cell, data.pbc,
                                model.denoiser.max_neighbors).num_edges
    if spec.get("save"): np.savez(spec["save"], **out)
    return rec


def run_one(spec: dict, timeout: float, mmap_threshold: int|None = None) -> dict:
    "`worker(spec)` in a fresh interpreter (with glibc's MALLOC_MMAP_THRESHOLD_ = `mmap_threshold` bytes if given)."
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if mmap_threshold is not None: env["MALLOC_MMAP_THRESHOLD_"] = str(mmap_threshold)
    p = subprocess.run([sys.executable, __file__, "--worker", json.dumps(spec)], capture_output=True, text=True,
                       env=env, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"worker {spec} failed (exit {p.returncode}):\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def linear_fit(x, y) -> dict:
    "y = intercept + slope * x (least squares), R^2, and the exponent of log y = a + k log x."
    x, y = np.asarray(x, float), np.asarray(y, float)
    slope, intercept = np.polyfit(x, y, 1)
    res = y - (intercept + slope * x)
    r2 = 1 - float((res ** 2).sum()) / float(((y - y.mean()) ** 2).sum()) if len(x) > 2 else float("nan")
    k = float(np.polyfit(np.log(x), np.log(y), 1)[0]) if (y > 0).all() else float("nan")
    return dict(slope=float(slope), intercept=float(intercept), r2=r2, loglog_exponent=k, points=len(x))


def compare(a: Path, b: Path) -> dict:
    "Largest differences between two saved results (chunked against unchunked)."
    A, B = np.load(a), np.load(b)
    out = {}
    for k in A.files:
        if k in B.files:
            d = float(np.abs(A[k].astype(np.float64) - B[k].astype(np.float64)).max())
            out[f"{k}_max_abs_diff"] = d
            out[f"{k}_max_abs"] = float(np.abs(A[k]).max())
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backbone", default="painn", choices=list(BACKBONES), help="the model measured (see BACKBONES)")
    ap.add_argument("--sizes", type=int, nargs="+", help=f"nominal sizes, from {list(SIZES)} (default: the backbone's)")
    ap.add_argument("--max-unchunked", type=int, help="largest cell (atoms) for the unchunked path (default: the backbone's)")
    ap.add_argument("--max-rss-gb", type=float, default=4.0, help="skip a chunked run predicted to need more")
    ap.add_argument("--malloc-mmap-threshold", type=int, help="bytes: glibc's MALLOC_MMAP_THRESHOLD_ for the workers "
                    "(fixed: blocks of that size and more are mapped and given back when freed; default: glibc's own rule)")
    ap.add_argument("--no-grad", action="store_true", help="Sigma_i under no_grad and predict in the calculator's grad "
                    "mode (model.needs_autograd): what a user who only reads the numbers runs")
    ap.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per process")
    ap.add_argument("--out", type=Path, help="result file (default: results/ and the backbone's file name)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        print(json.dumps(worker(json.loads(a.worker))))
        return
    bb = BACKBONES[a.backbone]
    a.sizes = a.sizes or bb["sizes"]
    a.max_unchunked = bb["max_unchunked"] if a.max_unchunked is None else a.max_unchunked
    a.out = a.out or ROOT / "results" / (bb["out"].replace(".json", "_nograd.json") if a.no_grad else bb["out"])
    bad = [s for s in a.sizes if s not in SIZES]
    if bad: raise SystemExit(f"unknown size(s) {bad}; choose from {list(SIZES)}")
    from _env import environment, load_warning   # benchmarks/_env.py

    env_before = environment()
    runs, comparisons, skipped = [], [], []
    tmp = Path(tempfile.mkdtemp(prefix="bench_large_cells_"))
    print(f"{'atoms':>7s} {'edges':>9s} {'path':>9s} {'task':>10s} {'Sigma s':>8s} {'cpu':>7s} {'E,F,stress s':>12s} "
          f"{'cpu':>7s} {'peak MB':>8s} {'base MB':>8s}", flush=True)
    for size in sorted(a.sizes):
        rep = SIZES[size]
        n = 8 * rep[0] * rep[1] * rep[2]
        for path in ("unchunked", "chunked"):
            if path == "unchunked" and n > a.max_unchunked:
                skipped.append(dict(atoms=n, path=path, why=f"more than --max-unchunked {a.max_unchunked} atoms")); continue
            prev = [r for r in runs if r["path"] == path and r["task"] == "both"]
            if path == "chunked" and len(prev) >= 2:
                f = linear_fit([r["atoms"] for r in prev], [r["peak_MB"] for r in prev])
                guess = f["intercept"] + f["slope"] * n
                if guess > 1024 * a.max_rss_gb:
                    skipped.append(dict(atoms=n, path=path, why=f"predicted peak {guess:.0f} MB > --max-rss-gb {a.max_rss_gb}"))
                    continue
            for task in a.tasks:
                save = tmp / f"{n}_{path}_{task}.npz"
                rec = run_one(dict(backbone=a.backbone, repeat=rep, path=path, task=task, save=str(save), no_grad=a.no_grad), a.timeout,
                              a.malloc_mmap_threshold)
                runs.append(rec)
                fmt = lambda k: f"{rec[k]:8.2f}" if k in rec else f"{'-':>8s}"   # noqa: E731
                fmtc = lambda k: f"{rec[k]:7.2f}" if k in rec else f"{'-':>7s}"  # noqa: E731
                print(f"{n:7d} {rec['edges']:9d} {path:>9s} {task:>10s} {fmt('covariance_s')} {fmtc('covariance_cpu_s')} "
                      f"{fmt('predict_s'):>12s} {fmtc('predict_cpu_s')} {rec['peak_MB']:8.0f} {rec['baseline_MB']:8.0f}",
                      flush=True)
        for task in a.tasks:
            pair = [tmp / f"{n}_{p}_{task}.npz" for p in ("chunked", "unchunked")]
            if all(p.exists() for p in pair):
                comparisons.append(dict(atoms=n, task=task, **compare(*pair)))
    env_after = environment()

    fits = {}
    for path in ("chunked", "unchunked"):
        for task, keys in (("covariance", ("covariance_s", "covariance_cpu_s", "peak_MB")),
                           ("predict", ("predict_s", "predict_cpu_s", "peak_MB")), ("both", ("peak_MB",))):
            rs = [r for r in runs if r["path"] == path and r["task"] == task]
            if len(rs) < 2: continue
            for k in keys:
                fits[f"{path}/{task}/{k}"] = linear_fit([r["atoms"] for r in rs], [r[k] for r in rs])
    print("\nlinear fits y = intercept + slope * atoms (and the log-log exponent: 1 = linear):")
    for k, f in fits.items():
        unit = "MB" if k.endswith("MB") else "s"
        print(f"  {k:38s} slope {1000 * f['slope']:9.3f} {unit}/1000 atoms, intercept {f['intercept']:9.2f} {unit}, "
              f"R^2 {f['r2']:.4f}, exponent {f['loglog_exponent']:.3f} ({f['points']} sizes)")
    for c in comparisons:
        names = [k[:-len("_max_abs_diff")] for k in c if k.endswith("_max_abs_diff")]
        print(f"  {c['atoms']} atoms, {c['task']}: chunked - unchunked (float32), largest |difference| (largest |value|): "
              + ", ".join(f"{q} {c[q + '_max_abs_diff']:.1e} ({c[q + '_max_abs']:.1e})" for q in names))
    for s in skipped: print(f"  skipped {s['path']} at {s['atoms']} atoms: {s['why']}")
    if (w := load_warning(env_before, env_after)): print(w)
    for p in tmp.iterdir(): p.unlink()
    tmp.rmdir()
    report = dict(
        benchmark=bb["description"] + ("" if a.malloc_mmap_threshold is None else
                                       f", glibc MALLOC_MMAP_THRESHOLD_={a.malloc_mmap_threshold}")
                  + (", Sigma_i under no_grad, predict in the calculator's grad mode" if a.no_grad else ""),
        # the headline: Sigma_i + energy, forces and stress of one cell per size and path (the report's summary)
        rows={f"{r['atoms']} atoms {r['path']}": dict(peak_rss_MB=r["peak_MB"], seconds=r["covariance_s"] + r["predict_s"],
                                                     cpu_seconds=r["covariance_cpu_s"] + r["predict_cpu_s"])
              for r in runs if r["task"] == "both" and "predict_s" in r},
        runs=runs, fits=fits, chunked_vs_unchunked=comparisons, skipped=skipped,
        config=dict(structures="ase.build.bulk('Si', cubic=True).repeat(r), rattled 0.05 A (seed 0)",
                    repeats={str(8 * r[0] * r[1] * r[2]): r for r in SIZES.values()},
                    model=f"build_model(**{bb['model']!r}).eval()", warmup=bb["warmup"],
                    peak="resource.getrusage(RUSAGE_SELF).ru_maxrss of the process (MB)"),
        settings={k: str(v) if isinstance(v, Path) else v for k, v in vars(a).items() if k != "worker"},
        environment_before=env_before, environment_after=env_after)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(report, indent=1))
    print("wrote", a.out)


if __name__ == "__main__":
    main()
