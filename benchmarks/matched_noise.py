"""Does learned anisotropic noise beat isotropic noise of the same size? One table on ethanol at the `cpu-30min` budget.

Each row is a fine-tuning noise with its pre-trained weights, 3 seeds paired by seed (same split, same initialisation
of the heads, same data order). Beside its errors: the noise's size (the mean per-atom variance tr(Sigma_i)/3 on the
training structures) and its anisotropy (mean lambda_max / lambda_min of Sigma_i). Every row is compared, seed by
seed, with DeNS at the sigma_p whose variance equals the learned generators' (0.1 A: 0.0100 A^2) and with the best
isotropic row measured (lowest mean force MAE among the DeNS sigma_p and DenoiseVAE rows).

Rows come from two places: those in an ablation results file (`--ablation`, rows `none`, `dens` = sigma_p 0.05,
`dens sigma_p=0.07`, `dens sigma_p=0.1`, `dens sigma_p=0.14`, `denoisevae`, `anids-add`, `anids`; runs trained one
`anids-train` at a time join it through `nbs/ablation.ipynb`'s `add_runs`), and finished `anids-train` runs in `--runs`,
one folder `<row>_seed<k>` each (`anids_kl0.1`: AniDS from the lambda_KL 0.1 generator), or, where this machine lacks
the folders, the same runs in the previous results file (`--previous`). A row whose seeds are not all finished is
listed as missing, never averaged over fewer seeds without saying so.

    anids-train --recipe cpu-30min --seed 0 --threads 1 --train train.xyz --test test_MD.xyz \\
        --method anids --pretrained data/checkpoints/anisotropy_sweep/kl0.1/pretrain_qm9_painn_demo_anids.pt \\
        --out runs/matched/anids_kl0.1_seed0            # seeds 0-2; and --method dens --sigma-p 0.07 / 0.14 --pretrained qm9
    python benchmarks/matched_noise.py --train train.xyz

In the authors' loss unit (energy_std), every row from its own runs (`benchmarks/matched_noise_runs.py`):

    python benchmarks/matched_noise.py --train train.xyz --all-from-runs --runs runs/matched_energy_std \
        --rows dens_0.1 dens_0.14 denoisevae anids --out results/matched_noise_ethanol_energy_std.json
"""
from __future__ import annotations
import argparse, json
from pathlib import Path
import numpy as np

SEEDS = (0, 1, 2)
SHIPPED = "data/checkpoints/pretrain_qm9_painn_demo_{}.pt"
KL01 = "data/checkpoints/anisotropy_sweep/kl0.1/pretrain_qm9_painn_demo_anids.pt"
# row key -> (label, method, where its runs are, the generator whose Sigma it draws, or its DeNS sigma_p)
ROWS = {
    "none": ("no denoising", "none", ("ablation", "none"), None),
    "dens_0.05": ("DeNS, σ_p 0.05 Å", "dens", ("ablation", "dens"), 0.05),
    "dens_0.07": ("DeNS, σ_p 0.07 Å", "dens", ("ablation", "dens sigma_p=0.07"), 0.07),
    "dens_0.1": ("DeNS, σ_p 0.1 Å", "dens", ("ablation", "dens sigma_p=0.1"), 0.1),
    "dens_0.14": ("DeNS, σ_p 0.14 Å", "dens", ("ablation", "dens sigma_p=0.14"), 0.14),
    "denoisevae": ("DenoiseVAE (learned, isotropic)", "denoisevae", ("ablation", "denoisevae"), SHIPPED.format("denoisevae")),
    "anids-add": ("AniDS-add, shipped generator", "anids-add", ("ablation", "anids-add"), SHIPPED.format("anids-add")),
    "anids": ("AniDS, shipped generator (λ_KL 1)", "anids", ("ablation", "anids"), SHIPPED.format("anids")),
    "anids_kl0.1": ("AniDS, generator of λ_KL 0.1", "anids", ("runs", "anids_kl0.1"), KL01),
}
MATCHED = "dens_0.1"
SETTINGS = ("epochs", "scale_statistic", "sigma_p", "method")   # recorded per run read from its folder
METRICS = ("force_mae_meV_A", "force_rmse_meV_A", "energy_mae_meV", "energy_rmse_meV")


def noise_of(source, structures) -> dict:
    "Mean per-atom variance tr(Sigma_i)/3 (A^2) and mean lambda_max/lambda_min of a noise on `structures`."
    if not isinstance(source, str):   # DeNS: isotropic, sigma_p^2 on every atom
        return {"noise_variance_A2": float(source) ** 2, "anisotropy_mean": 1.0}
    import torch
    from torch_geometric.loader import DataLoader
    from anids.method.checkpoints import load_model
    model = load_model(source).eval()
    var, ratio = [], []
    with torch.no_grad():
        for b in DataLoader(structures, batch_size=64):
            ev = torch.linalg.eigvalsh(model.covariance(b).matrix.double())
            var.append(ev.mean(-1)); ratio.append(ev[:, 2] / ev[:, 0])
    return {"noise_variance_A2": float(torch.cat(var).mean()), "anisotropy_mean": float(torch.cat(ratio).mean())}


def runs_of(key, ablation: dict|None, runs_dir: Path, previous: dict|None = None) -> dict[int, dict]:
    """seed -> test metrics of a row's finished runs. A run folder that this machine lacks (run folders are not
    committed) is taken from the previous results file, whose records name the run they came from. Without an
    ablation file every row is read from its run folders `<row>_seed<k>`."""
    kind, name = ROWS[key][2] if ablation is not None else ("runs", key)
    out = {}
    if kind == "ablation":
        for r in ablation["runs"]:
            if r["row"] == name and not r.get("diverged"): out[r["seed"]] = r["test"] | {"source": "ablation"}
    else:
        for s in SEEDS:
            f = runs_dir / f"{name}_seed{s}" / "metrics.json"
            if f.is_file():
                m = json.loads(f.read_text())
                out[s] = m["test"] | {"source": str(f), "train_time_s": m.get("train_time_s"),
                                      "git_revision": m.get("versions", {}).get("git_revision"),
                                      # windows with a loss 100x the typical one (a bad noise draw; anids.train.callbacks.loss_spikes)
                                      "loss_spikes": (m.get("loss_spikes") or {}).get("count"),
                                      "settings": {k: m.get("config", {}).get(k) for k in SETTINGS}}
            elif previous is not None:
                old = [r for r in previous.get("runs", []) if r["model"] == ROWS[key][0] and r["seed"] == s]
                if old: out[s] = {m: old[0][m] for m in METRICS} | {"source": old[0]["source"],
                                  **{k: old[0][k] for k in ("train_time_s", "git_revision", "loss_spikes") if k in old[0]}}
    return out


def stat(values) -> dict:
    v = np.asarray(values, float)
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if v.size > 1 else float("nan"), "n": int(v.size)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", required=True, help="the training structures (for each noise's size on them)")
    p.add_argument("--ablation", default="results/ablation_ethanol_cpu30min.json")
    p.add_argument("--all-from-runs", action="store_true", help="read every row from --runs, none from --ablation")
    p.add_argument("--rows", nargs="+", choices=list(ROWS), default=list(ROWS), help="the rows of the table")
    p.add_argument("--runs", default="runs/matched")
    p.add_argument("--out", default="results/matched_noise_ethanol_cpu30min.json")
    p.add_argument("--previous", default=None,
                   help="earlier results file: its runs stand in for run folders not on this machine (default: --out; '' for none)")
    p.add_argument("--figure", default=None, help="default: figures/<stem of --out>.png")
    a = p.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    from anids.data import read_structures
    structures = read_structures(a.train)
    ablation = None if a.all_from_runs else json.loads(Path(a.ablation).read_text())
    previous = a.out if a.previous is None else a.previous
    previous = json.loads(Path(previous).read_text()) if previous and Path(previous).is_file() else None
    rows, missing = {}, {}
    for key, (label, method, _, source) in ((k, ROWS[k]) for k in a.rows):
        seeds = runs_of(key, ablation, Path(a.runs), previous)
        if sorted(seeds) != list(SEEDS):
            missing[key] = f"{label}: seeds {sorted(seeds)} of {list(SEEDS)} finished"
            continue
        rows[key] = {"label": label, "method": method, "seeds": seeds,
                     **(noise_of(source, structures) if source is not None else {"noise_variance_A2": 0.0, "anisotropy_mean": None})}
    budget = "cpu-30min (PaiNN demo, 600 epochs, one thread), losses in units of the training force RMS"
    if not rows: raise SystemExit("no row has finished every seed: " + "; ".join(missing.values()))
    if a.all_from_runs:   # the settings the runs themselves recorded, which must agree
        settings = {k: {json.dumps(r["seeds"][s]["settings"][k]) for r in rows.values() for s in SEEDS} for k in ("epochs", "scale_statistic")}
        if any(len(v) != 1 for v in settings.values()):
            raise SystemExit(f"the runs differ in their settings: {settings}")
        epochs, unit = (json.loads(settings[k].pop()) for k in ("epochs", "scale_statistic"))
        budget = (f"cpu-30min with {epochs} epochs (PaiNN demo, one thread), losses in units of the training "
                  + {"energy_std": "energy std (the authors' unit)", "force_rms": "force RMS"}[unit])
    iso = [k for k in rows if rows[k]["method"] in ("dens", "denoisevae")]
    mean_mae = lambda k: np.mean([rows[k]["seeds"][s]["force_mae_meV_A"] for s in SEEDS])
    best_iso = min(iso, key=mean_mae)
    runs = []
    for key, r in rows.items():
        for s in SEEDS:
            t = r["seeds"][s]
            rec = {"model": r["label"], "method": r["method"], "seed": s, **{m: t[m] for m in METRICS},
                   "noise_variance_A2": r["noise_variance_A2"], "source": t["source"],
                   **{k: t[k] for k in ("train_time_s", "git_revision", "loss_spikes") if t.get(k) is not None}}
            if r["anisotropy_mean"] is not None: rec["anisotropy_mean"] = r["anisotropy_mean"]
            for ref, tag in ((MATCHED, "minus_dens_0.1"), (best_iso, "minus_best_isotropic")):
                if ref in rows and ref != key:
                    for m in ("force_mae_meV_A", "force_rmse_meV_A"):
                        rec[f"{m}_{tag}"] = t[m] - rows[ref]["seeds"][s][m]
            runs.append(rec)
    spiked = lambda r: [s for s in SEEDS if (r["seeds"][s].get("loss_spikes") or 0) > 0]
    known = lambda r: all(r["seeds"][s].get("loss_spikes") is not None for s in SEEDS)
    table = {r["label"]: {"noise_variance_A2": r["noise_variance_A2"], "anisotropy_mean": r["anisotropy_mean"],
                          **{m: stat([r["seeds"][s][m] for s in SEEDS]) for m in METRICS},
                          **({"seeds_with_loss_spikes": len(spiked(r))} if known(r) else {})} for r in rows.values()}
    paired = {}
    for key in ("anids", "anids_kl0.1", "anids-add"):
        if key in rows:
            for ref in dict.fromkeys((MATCHED, best_iso)):
                d = {m: stat([rows[key]["seeds"][s][m] - rows[ref]["seeds"][s][m] for s in SEEDS])
                     for m in ("force_mae_meV_A", "force_rmse_meV_A")}
                calm = [s for s in SEEDS if s not in spiked(rows[key]) + spiked(rows[ref])]
                if known(rows[key]) and known(rows[ref]) and len(calm) < len(SEEDS):   # a spiked run is a failure of its row
                    d["seeds_without_loss_spikes"] = calm
                    d.update({f"{m}_without_loss_spikes": stat([rows[key]["seeds"][s][m] - rows[ref]["seeds"][s][m] for s in calm])
                              for m in ("force_mae_meV_A", "force_rmse_meV_A")})
                paired[f"{rows[key]['label']} minus {rows[ref]['label']}"] = d
    out = {"description": ("Does learned anisotropic noise beat isotropic noise of the same size? Ethanol (rMD17 geometries, "
                           "PBE/def2-SVP labels; 950 train / 50 val split by the seed; test_MD.xyz, 1000 frames, no noise), "
                           f"{budget}, seeds 0-2 paired. noise_variance_A2: mean "
                           "tr(Sigma_i)/3 on the training structures; *_minus_*: this seed minus the reference row's seed; "
                           "seeds_with_loss_spikes: runs whose training loss had a window 100 times its typical value "
                           "(a bad noise draw), where the run recorded it."),
           "recipe": "cpu-30min", "dataset": "ethanol_rmd17_pbe",
           "best_isotropic": rows[best_iso]["label"], "matched_isotropic": rows[MATCHED]["label"] if MATCHED in rows else None,
           "table": table, "paired": paired, "missing": missing, "runs": runs,
           "commands": [l.strip() for l in __doc__.split("\n\n")[-1 if a.all_from_runs else -3].strip().splitlines()]}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1, default=str) + "\n")
    for label, t in table.items():
        print(f"{label:38s} var {t['noise_variance_A2']:.4f}  F MAE {t['force_mae_meV_A']['mean']:.3f} ± "
              f"{t['force_mae_meV_A']['std']:.3f}  RMSE {t['force_rmse_meV_A']['mean']:.2f} ± {t['force_rmse_meV_A']['std']:.2f}"
              + (f"  loss spikes in {t['seeds_with_loss_spikes']} of 3 runs" if "seeds_with_loss_spikes" in t else ""))
    for k, d in paired.items():
        print(f"{k}: MAE {d['force_mae_meV_A']['mean']:+.3f} ± {d['force_mae_meV_A']['std']:.3f}, "
              f"RMSE {d['force_rmse_meV_A']['mean']:+.3f} ± {d['force_rmse_meV_A']['std']:.3f}" + (
              f"; seeds {d['seeds_without_loss_spikes']} without loss spikes: MAE {d['force_mae_meV_A_without_loss_spikes']['mean']:+.3f} "
              f"± {d['force_mae_meV_A_without_loss_spikes']['std']:.3f}" if "seeds_without_loss_spikes" in d else ""))
    for v in missing.values(): print("missing:", v)
    figure(rows, a.figure or f"figures/{Path(a.out).stem}.png", budget)
    return 0


def figure(rows, path, budget):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3.4))
    style = {"dens": "o", "denoisevae": "s", "anids-add": "^", "anids": "D"}
    values = []
    for i, (key, r) in enumerate(rows.items()):
        if r["method"] == "none": continue
        v = [r["seeds"][s]["force_mae_meV_A"] for s in SEEDS]
        spiked = [(r["seeds"][s].get("loss_spikes") or 0) > 0 for s in SEEDS]
        values += v
        ani = f" (λmax/λmin {r['anisotropy_mean']:.2f})" if r["method"] in ("anids", "anids-add") else ""
        note = f", loss spikes in {sum(spiked)} run(s) (×)" if any(spiked) else ""
        ax.errorbar(r["noise_variance_A2"], np.mean(v), yerr=np.std(v, ddof=1), fmt=style[r["method"]], color=f"C{i}",
                    capsize=2, ms=5, label=f"{r['label']}{ani}: {np.mean(v):.2f} ± {np.std(v, ddof=1):.2f}{note}")
        for x, bad in zip(v, spiked):   # every seed, so that one failed run cannot hide in a mean
            ax.plot(r["noise_variance_A2"] + 0.0002, x, "x" if bad else ".", color=f"C{i}", ms=5 if bad else 3)
    if max(values) > 3 * min(values): ax.set_yscale("log")
    none = (f"; no denoising {np.mean([rows['none']['seeds'][s]['force_mae_meV_A'] for s in SEEDS]):.2f} meV/Å"
            if "none" in rows else "")
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0), title=f"force MAE, mean ± std of 3 seeds (dots: each seed){none}", title_fontsize=6)
    ax.set_xlabel("noise size: mean per-atom variance tr(Σ_i)/3 (Å²)")
    ax.set_ylabel("test force MAE (meV/Å)")
    ax.set_title(f"Ethanol, {budget.split(' (')[0]}, 3 seeds: learned anisotropy against isotropic noise of the same size", fontsize=7)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130, bbox_inches="tight")
    plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main())
