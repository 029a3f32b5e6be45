"""Add finished `anids-train` runs of the cpu-30min recipe to results/compare_mace.json as a re-run (its `reruns`).

    python benchmarks/add_rerun.py --label "compiled, 1400 epochs" --description "..." \
        --runs runs/compiled_1400/anids_seed0 runs/compiled_1400/anids_seed1 runs/compiled_1400/anids_seed2

Each run is read from its folder's metrics.json (test and validation errors, wall and training time, settings, code
versions); its CPU time from `<run folder>.log` when that log ends with GNU time's report (`/usr/bin/time -v
anids-train ...`), else it is not recorded. The re-run's table holds, per method, the mean ± std (ddof 1) over the
seeds of the test force MAE and RMSE (meV/A) and energy MAE and RMSE (meV/atom), the numbers the report's
compare_mace section shows beside the recipe's other rows. A label already there is an error unless --replace."""
import argparse, json, math, re
from pathlib import Path

from anids.results.sections import seed_stats

METRICS = ("force_mae_meV_A", "force_rmse_meV_A", "energy_mae_meV_atom", "energy_rmse_meV_atom")


def cpu_seconds(log: Path) -> float|None:
    "User plus system seconds from GNU time's report at the end of a run's log, or None."
    if not log.is_file(): return None
    text = log.read_text(errors="replace")
    user, system = (re.search(rf"{k} time \(seconds\): ([0-9.]+)", text) for k in ("User", "System"))
    return float(user.group(1)) + float(system.group(1)) if user and system else None


def run_record(folder: Path) -> dict:
    m = json.loads((folder / "metrics.json").read_text())
    if not m.get("test"): raise ValueError(f"{folder}/metrics.json has no test errors: not a finished run with --test")
    c = m["config"]
    return {"method": c["method"], "seed": c["seed"], "test": m["test"], "val": m.get("val"),
            "train_time_s": m.get("train_time_s"), "wall_time_s": m.get("wall_time_s"),
            "cpu_time_s": cpu_seconds(folder.parent / f"{folder.name}.log"), "pretrained": m.get("pretrained"),
            "epochs": c["epochs"], "threads": c.get("threads"), "sizes": m.get("sizes"), "versions": m.get("versions"),
            "loss_spikes": m.get("loss_spikes"),
            "config": {k: c.get(k) for k in ("recipe", "fast_step", "compile_step", "size_buckets", "sigma_p", "scale_statistic")
                       if k in c}}


def table_of(runs: list[dict], recipe: str) -> dict:
    out = {}
    for method in dict.fromkeys(r["method"] for r in runs):
        rs = sorted((r for r in runs if r["method"] == method), key=lambda r: r["seed"])
        entry = {"seeds": [r["seed"] for r in rs]}
        for k in METRICS:   # the report's mean ± std over seeds (ddof 1); two runs of one seed are an error
            v = [r["test"][k] for r in rs]
            st = seed_stats(v, entry["seeds"], f"{recipe} {method}, {k}")
            entry[k] = {"mean": st.mean, "std": None if math.isnan(st.std) else st.std, "values": v}
        out[f"{recipe} {method}"] = entry
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--label", required=True, help="the re-run's name, shown beside its rows")
    ap.add_argument("--description", required=True, help="what was run, how and why (the report prints it)")
    ap.add_argument("--runs", nargs="+", type=Path, required=True, help="run folders (each with metrics.json)")
    ap.add_argument("--results", type=Path, default=Path("results/compare_mace.json"))
    ap.add_argument("--recipe", default="cpu-30min", help="the rows' name prefix (default cpu-30min)")
    ap.add_argument("--replace", action="store_true", help="replace a re-run of the same label")
    a = ap.parse_args(argv)
    d = json.loads(a.results.read_text())
    reruns = d.setdefault("reruns", [])
    if any(r["label"] == a.label for r in reruns) and not a.replace:
        raise SystemExit(f"{a.results} already has a re-run labelled {a.label!r}; --replace replaces it")
    runs = [run_record(f) for f in a.runs]
    entry = {"label": a.label, "description": a.description, "runs": runs, "table": table_of(runs, a.recipe)}
    d["reruns"] = [r for r in reruns if r["label"] != a.label] + [entry]
    tmp = a.results.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(d, indent=1))
    tmp.replace(a.results)   # whole or not at all
    for row, e in entry["table"].items():
        print(f"{row} ({a.label}): " + ", ".join(f"{k} {e[k]['mean']:.2f} ± {e[k]['std'] or 0:.2f}" for k in METRICS))


if __name__ == "__main__":
    main()
