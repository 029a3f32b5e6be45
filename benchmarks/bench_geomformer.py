"""GeoMFormer: parameter counts of the presets and the time of one training step of the MPtrj configuration.

    python benchmarks/bench_geomformer.py                     # 4 periodic Si cells of 64 atoms, 1 thread
    python benchmarks/bench_geomformer.py --batch 2 --threads 2 --profile

The structures are `ase.build.bulk("Si", cubic=True)` repeated 2 x 2 x 2 (64 atoms, periodic), rattled by 0.05 A
(one seed per structure), float32, with random labels (energy, forces, stress: only the time is measured). The model is
`build_model("geomformer", preset="mptrj", generator_preset="mptrj_generator")`: the AniDS paper's MPtrj GeoMFormer
(6 layers, d = 128, 8 heads, FFN 128, 10 radial bases, cutoff 5 A) and its 2-layer noise generator.

One step = `model.losses` (forward; conservative forces and stress by autograd with create_graph) + `backward()` of the
total loss; the optimiser step is not included. Three recipes, timed alternately so that a change of the machine's
load hits all of them alike:

* `none`: energy, force and stress losses, no noise;
* `anids`: the paper's MPtrj GeoMFormer recipe (p = 0.25, r = 0.25, sigma_p = 0.05, lambda_denoise 0.8, lambda_KL 1e-3,
  lambda_gamma 0, generator trained jointly) plus the stress loss; the corruption draws are seeded per step, so every
  repeat corrupts the same structures; its mean over steps is the expected cost of a step;
* `anids_all`: the same with p = 1 (every structure corrupted, the generator runs at every step; the worst case).

Reports per recipe the median and mean over `--steps` timed steps (after 1 warm-up step) of each of `--repeats`
rounds, the forward / backward split, and the ratios to `none` (medians of the per-round ratios), and writes
results/bench_geomformer.json with the machine, its load, threads and package versions before and after
(benchmarks/_env.py).
"""
from __future__ import annotations
import argparse, json, os, statistics, sys, time
from pathlib import Path

# OpenMP reads its wait policy when torch loads: PASSIVE unless the environment says otherwise (see bench_equiformer_v2.py)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import numpy as np   # noqa: E402
import torch         # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from anids.nn.backbones import build, count_parameters, PRESETS   # noqa: E402
from anids.method.model import build_model, DenoisingConfig          # noqa: E402
from anids.method.losses import LossWeights                          # noqa: E402
from anids.data.structures import atoms_to_data                    # noqa: E402
from torch_geometric.data import Batch                        # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import environment, load_warning                    # noqa: E402  (benchmarks/_env.py)

RECIPES = {
    "none": dict(method="none", p=0.0, r=0.0),
    "anids": dict(method="anids", p=0.25, r=0.25),
    "anids_all": dict(method="anids", p=1.0, r=0.25),
}


def si_batch(batch: int, repeat: int, seed: int = 0) -> Batch:
    "`batch` rattled Si cells (cubic 8-atom cell repeated `repeat` times per axis) with random labels."
    from ase.build import bulk
    g = np.random.default_rng(seed)
    frames = []
    for k in range(batch):
        a = bulk("Si", cubic=True).repeat((repeat,) * 3)
        a.rattle(0.05, seed=seed + k)
        s = g.normal(size=(3, 3)) * 1e-3
        frames.append(atoms_to_data(a, energy=-5.4 * len(a) + g.normal(), forces=g.normal(size=(len(a), 3)),
                                    stress=0.5 * (s + s.T)))
    return Batch.from_data_list(frames)


def make_model(method: str, seed: int = 0):
    return build_model(backbone="geomformer", preset="mptrj", generator_preset="mptrj_generator", method=method,
                       atomic_energies={14: -5.4}, seed=seed).train()


def time_steps(model, data, recipe: dict, steps: int, first_seed: int = 0) -> list[tuple[float, float, int]]:
    cfg = DenoisingConfig(p=recipe["p"], r=recipe["r"], sigma_p=0.05, train_generator=recipe["method"] != "none")
    w = LossWeights(lambda_energy=1.0, lambda_force=1.0, lambda_stress=1.0, lambda_denoise=0.8, lambda_kl=1e-3,
                    lambda_gamma=0.0)
    out = []
    for k in range(steps):
        model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        loss, terms = model.losses(data, cfg, w, rng=torch.Generator().manual_seed(first_seed + k))
        t1 = time.perf_counter()
        loss.backward()
        out.append((t1 - t0, time.perf_counter() - t1, int("denoise" in terms)))
    return out


def summary(ts):
    tot = [f + b for f, b, _ in ts]
    return dict(ms_per_step=1000 * statistics.median(tot), mean_ms_per_step=1000 * statistics.mean(tot),
                forward_ms=1000 * statistics.median([f for f, _, _ in ts]),
                backward_ms=1000 * statistics.median([b for _, b, _ in ts]), min_ms=1000 * min(tot),
                steps_with_corruption=sum(c for _, _, c in ts), steps_ms=[1000 * t for t in tot])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=4, help="structures per batch (default 4)")
    ap.add_argument("--repeat", type=int, default=2, help="the 8-atom cubic Si cell repeated this many times per axis (default 2: 64 atoms)")
    ap.add_argument("--steps", type=int, default=6, help="timed steps per round (after 1 warm-up step)")
    ap.add_argument("--repeats", type=int, default=3, help="rounds; the recipes alternate within each round")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--profile", action="store_true", help="print a torch.profiler table of one anids_all step")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "bench_geomformer.json")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)

    counts = {p: count_parameters(build("geomformer", p)) for p in PRESETS["geomformer"]}
    for p, n in counts.items(): print(f"geomformer/{p:16s} {n:>12,d} parameters")
    data = si_batch(a.batch, a.repeat)
    models = {name: make_model(r["method"]) for name, r in RECIPES.items()}
    whole = count_parameters(models["anids"])
    print(f"AniDS model (mptrj denoiser + mptrj_generator): {whole:,d} parameters")
    from anids.nn.graphs import radius_graph
    g = radius_graph(data.pos, 5.0, data.batch, data.cell, data.pbc)
    print(f"{a.batch} structures x {data.num_nodes // a.batch} atoms, {g.num_edges} edges within 5 A, "
          f"{torch.get_num_threads()} thread(s), torch {torch.__version__}")

    if a.profile:
        from torch.profiler import profile, ProfilerActivity
        time_steps(models["anids_all"], data, RECIPES["anids_all"], 1)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            time_steps(models["anids_all"], data, RECIPES["anids_all"], 1)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))

    env_before = environment()
    for name, r in RECIPES.items(): time_steps(models[name], data, r, 1, first_seed=10_000)   # warm-up
    res = {name: [] for name in RECIPES}
    for rnd in range(a.repeats):
        for name, r in RECIPES.items():
            s = summary(time_steps(models[name], data, r, a.steps))
            res[name].append(s)
            print(f"[{rnd + 1}/{a.repeats}] {name:10s} median {s['ms_per_step']:8.0f} ms/step, mean {s['mean_ms_per_step']:8.0f} "
                  f"(forward {s['forward_ms']:.0f}, backward {s['backward_ms']:.0f}; {s['steps_with_corruption']}/{a.steps} "
                  "steps with corrupted atoms)", flush=True)
    ratios = {}
    for name in ("anids", "anids_all"):
        for stat in ("ms_per_step", "mean_ms_per_step"):
            ratios[f"{name}_over_none_{stat.removesuffix('_per_step')}"] = statistics.median(
                [x[stat] / y[stat] for x, y in zip(res[name], res["none"])])
    env_after = environment()
    print("ratios to no noise (median over rounds):", ", ".join(f"{k} {v:.3f}" for k, v in ratios.items()))
    if (w := load_warning(env_before, env_after)): print(w)
    report = dict(
        ratios=ratios,
        benchmark="GeoMFormer mptrj training step (forward + backward; conservative forces and stress), float32",
        runs={name: dict(rounds=rs, ms_per_step=statistics.median([s["ms_per_step"] for s in rs]),
                         mean_ms_per_step=statistics.median([s["mean_ms_per_step"] for s in rs]),
                         recipe=RECIPES[name]) for name, rs in res.items()},
        parameters=dict(presets=counts, anids_model_mptrj=whole),
        config=dict(structures=f"bulk('Si', cubic=True).repeat({a.repeat}) rattled 0.05 A", batch=a.batch,
                    atoms=int(data.num_nodes), edges=g.num_edges, preset="mptrj", generator_preset="mptrj_generator",
                    preset_config=PRESETS["geomformer"]["mptrj"]),
        settings={k: str(v) if isinstance(v, Path) else v for k, v in vars(a).items()},
        threads=torch.get_num_threads(), environment_before=env_before, environment_after=env_after)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(report, indent=1))
    print("wrote", a.out)


if __name__ == "__main__":
    main()
