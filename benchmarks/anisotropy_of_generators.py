"""How anisotropic is each learned generator, and is its smallest variance along the bonds? On held-out QM9 molecules
(the pre-training's own held-out split): the distribution of lambda_max / lambda_min of Sigma_i, and the angle between
each atom's smallest-variance axis and its closest bond (`anids.analysis.covariance.bond_alignment`) against the same
eigenvalues in random orientations. Writes a results JSON and one figure.

    python benchmarks/anisotropy_of_generators.py                       # the shipped generators and the sweep's
    python benchmarks/anisotropy_of_generators.py --checkpoints a.pt b.pt --labels a b
"""
from __future__ import annotations
import argparse, json, sys, time
from pathlib import Path
import numpy as np

SHIPPED = {"AniDS, shipped (envelope on b_ij)": "data/checkpoints/pretrain_qm9_painn_demo_anids.pt",
           "AniDS-add, shipped (envelope on b_ij)": "data/checkpoints/pretrain_qm9_painn_demo_anids-add.pt"}


def measure(model, molecules, seed: int = 0) -> dict:
    import torch
    from anids.data.structures import atoms_batch
    from anids.analysis.covariance import principal_axes, anisotropy, bond_alignment, random_orientation
    ratios, angles, random_angles, std = [], [], [], []
    rng = np.random.default_rng(seed)
    for atoms in molecules:
        with torch.no_grad(): S = model.covariance(atoms_batch([atoms], torch.float64)).matrix.numpy()
        w, _ = principal_axes(S)
        ratios.append(anisotropy(w)); std.append(np.sqrt(w.mean(1)))
        angles.append(bond_alignment(S, atoms)); random_angles.append(bond_alignment(random_orientation(S, rng), atoms))
    r, a, ra = np.concatenate(ratios), np.concatenate(angles), np.concatenate(random_angles)
    a_ok, ra_ok = a[np.isfinite(a)], ra[np.isfinite(ra)]
    q = lambda x, p: float(np.quantile(x, p)) if x.size else float("nan")
    return {"n_molecules": len(molecules), "n_atoms": int(r.size),
            "anisotropy": {"mean": float(r.mean()), "median": q(r, 0.5), "p95": q(r, 0.95), "max": float(r.max()),
                           "fraction_above_1.5": float((r > 1.5).mean()), "fraction_above_2": float((r > 2).mean())},
            "rms_std_A": float(np.sqrt((np.concatenate(std) ** 2).mean())),
            "bond_angle_deg": {"n_atoms": int(a_ok.size), "median": q(a_ok, 0.5), "mean": float(a_ok.mean()) if a_ok.size else None,
                               "fraction_below_20": float((a_ok < 20).mean()) if a_ok.size else None},
            "random_orientation_bond_angle_deg": {"median": q(ra_ok, 0.5), "mean": float(ra_ok.mean()) if ra_ok.size else None,
                                                  "fraction_below_20": float((ra_ok < 20).mean()) if ra_ok.size else None},
            "_hist": {"ratio": r.tolist(), "angle": a_ok.tolist(), "random_angle": ra_ok.tolist()}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoints", nargs="*", default=None)
    p.add_argument("--labels", nargs="*", default=None)
    p.add_argument("--sweep", default="results/pretrain_anisotropy_sweep", help="the sweep's results folder (its rows are added)")
    p.add_argument("--n-molecules", type=int, default=300)
    p.add_argument("--out", default="results/anisotropy/generators.json")
    p.add_argument("--figure", default="figures/anisotropy_of_generators.png")
    a = p.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    from anids.method.checkpoints import load_model
    from anids.data.pretrain_data import load_qm9
    from ase import Atoms
    if a.checkpoints:
        labels = a.labels or [Path(c).stem for c in a.checkpoints]
        if len(labels) != len(a.checkpoints): raise SystemExit("give one label per checkpoint")
        models = dict(zip(labels, a.checkpoints))
    else:
        models = dict(SHIPPED)
        for f in sorted(Path(a.sweep).glob("*.json")):
            row = json.loads(f.read_text())
            if row.get("checkpoint") and Path(row["checkpoint"]).is_file():
                if row["checkpoint"] in models.values(): continue   # a shipped checkpoint listed by the sweep: measured once
                models[f"AniDS, sweep {row['row']} ({row['steps']} steps, {row['settings']})"] = row["checkpoint"]
    held = load_qm9(split="heldout", max_structures=a.n_molecules)
    molecules = [Atoms(numbers=s.z.numpy(), positions=s.pos.double().numpy()) for s in held]
    out = {"description": __doc__.splitlines()[0], "data": f"QM9 held-out split, first {len(molecules)} molecules",
           "units": {"anisotropy": "lambda_max / lambda_min", "angles": "degrees", "std": "A"}, "rows": {}}
    for label, ckpt in models.items():
        t0 = time.time()
        m = load_model(ckpt).double().eval()
        out["rows"][label] = {"checkpoint": ckpt, "cutoff_envelope": bool(m.generator.cutoff_envelope), **measure(m, molecules)}
        r = out["rows"][label]
        print(f"{label}: anisotropy mean {r['anisotropy']['mean']:.3f} (p95 {r['anisotropy']['p95']:.3f}, "
              f"{100 * r['anisotropy']['fraction_above_1.5']:.1f} % above 1.5); bond angle median "
              f"{r['bond_angle_deg']['median']:.1f} deg against {r['random_orientation_bond_angle_deg']['median']:.1f} random "
              f"({time.time() - t0:.0f} s)", flush=True)
    import matplotlib; matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    for label, r in out["rows"].items():
        h = r["_hist"]
        ax[0].hist(h["ratio"], bins=np.linspace(1, 4, 76), histtype="step", density=True, label=label)
        ax[1].hist(h["angle"], bins=np.linspace(0, 90, 46), histtype="step", density=True, label=label)
    any_row = next(iter(out["rows"].values()))["_hist"]
    ax[1].hist(any_row["random_angle"], bins=np.linspace(0, 90, 46), histtype="step", density=True, color="k", ls="--",
               label="random orientation (first row's eigenvalues)")
    ax[0].set_xlabel(r"$\lambda_{max}/\lambda_{min}$ of $\Sigma_i$"); ax[0].set_ylabel("density"); ax[0].set_yscale("log")
    ax[1].set_xlabel("angle between the smallest-variance axis and the closest bond (deg)")
    ax[1].legend(fontsize=6, loc="upper right")
    fig.suptitle(f"learned generators on {len(molecules)} held-out QM9 molecules")
    fig.tight_layout()
    Path(a.figure).parent.mkdir(parents=True, exist_ok=True); fig.savefig(a.figure, dpi=120)
    for r in out["rows"].values(): r.pop("_hist")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1))
    print(f"wrote {a.out} and {a.figure}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
