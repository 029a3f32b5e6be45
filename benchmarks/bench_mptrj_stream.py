"""Reading an MPtrj-like JSON file: the streaming reader of anids.data.materials against json.load (and ijson if installed).

    python benchmarks/bench_mptrj_stream.py                 # about 100 MB: 1500 materials x 6 frames x 32 atoms
    python benchmarks/bench_mptrj_stream.py --materials 300 # smaller

The file is written once into a temporary folder with the layout of `MPtrj_2022.9_full.json`
(`{mp_id: {frame_id: frame}}`, each frame a pymatgen Structure dict, two energies, forces, a 3x3 stress in kbar, magmoms
and the other scalar fields), from rattled 32-atom Si cells with random labels. Each reader runs in its own process so
that its peak memory (`ru_maxrss`) is its own:

* `stream_parse`: `anids.data.materials.stream_json_object`, every material parsed, nothing converted;
* `json_load`: `json.load` of the whole file (what one cannot do with the real 12 GB file);
* `ijson_kvitems`: `ijson.kvitems(f, "", use_float=True)`, if ijson is installed (not a dependency: it rejects NaN);
* `iter_mptrj`: `anids.data.mptrj.iter_mptrj` over the first `--convert` frames (structure checks, `Data` building).

Reports CPU seconds (each reader is single-threaded, so on a shared machine CPU time is the number to compare; wall
time is recorded too), MB and frames per CPU second, and the peak resident memory of each process above that of a process that only
imports anids.data.materials (torch and friends: several hundred MB), and writes results/bench_mptrj_stream.json with the machine and its load (benchmarks/_env.py).
"""
from __future__ import annotations
import argparse, json, os, resource, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def write_file(path: Path, materials: int, frames: int, seed: int = 0) -> int:
    "An MPtrj-like file; returns the number of frames."
    import numpy as np
    from ase.build import bulk
    g = np.random.default_rng(seed)
    base = bulk("Si", cubic=True).repeat((2, 2, 1))
    with open(path, "w") as fh:
        fh.write("{")
        for m in range(materials):
            fr = {}
            for k in range(frames):
                a = base.copy()
                a.rattle(0.05, seed=int(g.integers(1 << 30)))
                sites = [{"species": [{"element": "Si", "occu": 1}], "abc": f.tolist(), "xyz": x.tolist(), "label": "Si",
                          "properties": {"magmom": 0.0}} for x, f in zip(a.positions, a.get_scaled_positions())]
                e = float(g.normal(-5.4 * len(a), 1.0))
                fr[f"task-{m}-0-{k}"] = {
                    "structure": {"@module": "pymatgen.core.structure", "@class": "Structure", "charge": 0,
                                  "lattice": {"matrix": a.cell.array.tolist(), "pbc": [True, True, True]}, "sites": sites},
                    "uncorrected_total_energy": e, "corrected_total_energy": e, "energy_per_atom": e / len(a),
                    "ef_per_atom": 0.0, "e_per_atom_relaxed": e / len(a), "ef_per_atom_relaxed": 0.0,
                    "force": g.normal(0, 0.3, (len(a), 3)).tolist(), "stress": g.normal(0, 5, (3, 3)).tolist(),
                    "magmom": [0.0] * len(a), "bandgap": 0.5, "mp_id": f"mp-{m}"}
            fh.write(("," if m else "") + json.dumps(f"mp-{m}") + ":" + json.dumps(fr))
        fh.write("}")
    return materials * frames


def run_one(kind: str, path: str, convert: int) -> dict:
    """Runs in a child process: one reader over the file (every child imports anids.data.materials first, so that all run
    with the same objects in memory: Python's garbage collector walks them all, and torch brings many)."""
    import anids.data.materials  # noqa: F401
    t0, c0 = time.perf_counter(), time.process_time()
    n = 0
    if kind == "stream_parse":
        from anids.data.materials import stream_json_object
        for _, frames in stream_json_object(path):
            n += len(frames)
    elif kind == "json_load":
        with open(path) as fh:
            doc = json.load(fh)
        n = sum(len(v) for v in doc.values())
    elif kind == "ijson_kvitems":
        import ijson
        with open(path, "rb") as fh:
            for _, frames in ijson.kvitems(fh, "", use_float=True):
                n += len(frames)
    elif kind == "iter_mptrj":
        from anids.data.mptrj import iter_mptrj
        for _ in iter_mptrj(path, max_structures=convert):
            n += 1
    return {"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0, "frames": n,
            "peak_rss_MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--materials", type=int, default=1500)
    ap.add_argument("--frames", type=int, default=6)
    ap.add_argument("--convert", type=int, default=2000, help="frames converted to Data by iter_mptrj")
    ap.add_argument("--out", default=str(ROOT / "results" / "bench_mptrj_stream.json"))
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_one(args.child[0], args.child[1], int(args.child[2]))))
        return
    from _env import environment, load_warning
    try:
        import ijson  # noqa: F401
        kinds = ["stream_parse", "json_load", "ijson_kvitems", "iter_mptrj"]
    except ImportError:
        kinds = ["stream_parse", "json_load", "iter_mptrj"]
    before = environment()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mptrj_like.json"
        frames = write_file(path, args.materials, args.frames)
        size_mb = path.stat().st_size / 1e6
        baseline = subprocess.run([sys.executable, "-c", "import resource, anids.data.materials; print(resource.getrusage("
                                   "resource.RUSAGE_SELF).ru_maxrss / 1024)"], capture_output=True, text=True,
                                  check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        rows = {}
        for kind in kinds:
            out = subprocess.run([sys.executable, __file__, "--child", kind, str(path), str(args.convert)],
                                 capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
            r = json.loads(out.stdout.strip().splitlines()[-1])
            if kind != "iter_mptrj":
                r["MB_per_cpu_s"] = size_mb / r["cpu_seconds"]
            r["frames_per_cpu_s"] = r["frames"] / r["cpu_seconds"]
            r["extra_peak_rss_MB"] = r["peak_rss_MB"] - float(baseline.stdout.strip())
            rows[kind] = r
            print(f"{kind:14s} {r['cpu_seconds']:7.2f} CPU s ({r['seconds']:6.1f} s wall)  {r['frames']:6d} frames  "
                  f"{r['frames_per_cpu_s']:7.0f} frames/CPU s  "
                  + (f"{r['MB_per_cpu_s']:6.1f} MB/CPU s  " if "MB_per_cpu_s" in r else "")
                  + f"peak RSS +{r['extra_peak_rss_MB']:5.0f} MB over the imports")
    after = environment()
    result = {"file_MB": size_mb, "materials": args.materials, "frames": frames,
              "import_only_peak_rss_MB": float(baseline.stdout.strip()), "rows": rows,
              "environment_before": before, "environment_after": after}
    print(f"file {size_mb:.0f} MB; a process that only imports anids.data.materials peaks at "
          f"{result['import_only_peak_rss_MB']:.0f} MB")
    warn = load_warning(before, after)
    if warn:
        print(warn)
        result["warning"] = warn
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
