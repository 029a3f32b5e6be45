"""Time of one training step of the paper-scale recipes (Algorithm 2 with psi trained jointly), on a CPU or a GPU.

    python benchmarks/bench_recipe_steps.py --device cuda                       # every recipe below, on a GPU
    python benchmarks/bench_recipe_steps.py --recipes oc22 --steps 3 --warmup 1  # one recipe, a quick look on a CPU

For each recipe (`anids.train.RECIPES`: its backbone, preset, generator, batch size, force mode, p, r, sigma_p and
loss weights) and for each method (`none`, and the recipe's own `anids` with psi trained jointly), the model is
prepared exactly as `anids.train.fit` prepares it (`prepare_training`), moved to the device, and trained for
`--warmup` + `--steps` steps on batches of structures of the recipe's kind, with random labels (only the time is
measured):

* `oc22`, `mptrj-eqv2` (EquiformerV2) and `mptrj` (GeoMFormer): periodic cells built with ase, rattled by 0.05 A:
  for OC22, MgO(100) slabs of 80 atoms with an OH adsorbate (82 atoms, about the size of an OC22 slab and
  adsorbate); for MPtrj, bulk cells of 16-40 atoms (SrTiO3, NaCl, Si, Fe; 26 on average, MPtrj's is about 30);
* `rmd17-paper` (EquiformerV2, L = 3): the bundled aspirins (21 atoms), batch 2, the paper's cost-table setting;
* `pretrain-paper`: Algorithm 1 at the paper's PCQM4Mv2 scale (`anids.train.PRETRAIN_BUDGETS["paper"]`:
  EquiformerV2 L = 3, every atom corrupted; 40 structures per step, the paper's per-GPU share of its 160 on 4 GPUs;
  `--pretrain-batch-size` to change it) on QM9 molecules (`anids.data.pretrain_data.load_qm9`,
  18 atoms on average; the QM9 geometry cache must be there: `--data-dir`). Not in the default list; `none` is
  skipped for it (there is nothing to pre-train without noise).

A step is what the training loop does: the losses of Algorithm 2 (the recipe's weights at step 0), the backward pass
to the trained weights, gradient clipping where the recipe clips, and the fused AdamW step; on a GPU the clock is read
after `torch.cuda.synchronize()`. The neighbour lists are built inside the step, on the CPU (vesin), as in training.
The recipes with a KL-only warm-up (`oc22`, `mptrj-eqv2`) are timed after it: a warm-up step is cheaper (no
denoiser). Reports the median, mean and spread of the timed steps, the peak GPU memory, and the ratio of `anids` to
`none` (`ratios`: medians of the steps, anids over none, per recipe); writes a results JSON (default
results/bench_recipe_steps_<device>.json) after every recipe.
"""
from __future__ import annotations
import argparse, json, os, statistics, sys, time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # see bench_equiformer_v2.py
import numpy as np   # noqa: E402
import torch         # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from anids.nn.backbones import count_parameters                       # noqa: E402
from anids.data.structures import atoms_to_data                         # noqa: E402
from anids.train import make_config, prepare_training, RECIPES     # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import environment                                       # noqa: E402  (benchmarks/_env.py)

DEFAULT_RECIPES = ("oc22", "mptrj", "mptrj-eqv2", "rmd17-paper")
PRETRAIN_BATCH = [40]   # structures per step of pretrain-paper (main sets it from --pretrain-batch-size)


def _labelled(atoms, g: np.random.Generator):
    "atoms_to_data with random energy, forces and stress (timing only)."
    n = len(atoms)
    s = g.normal(size=(3, 3)) * 1e-3
    return atoms_to_data(atoms, energy=-5.0 * n + g.normal(), forces=g.normal(size=(n, 3)) * 0.3,
                         stress=0.5 * (s + s.T) if atoms.pbc.any() else None)


def oc22_like(count: int, seed: int = 0) -> list:
    "MgO(100) slabs (80 atoms, 2 x 2, vacuum 7.5 A) with an OH adsorbate, rattled."
    from ase import Atoms
    from ase.build import bulk, surface, add_adsorbate
    g, out = np.random.default_rng(seed), []
    for k in range(count):
        slab = surface(bulk("MgO", "rocksalt", a=4.21, cubic=True), (1, 0, 0), 3, vacuum=7.5).repeat((2, 2, 1))
        zs = slab.positions[:, 2]
        del slab[[i for i in range(len(slab)) if zs[i] < zs.min() + 0.5]]        # 96 -> 80 atoms
        add_adsorbate(slab, Atoms("OH", positions=[(0, 0, 0), (0, 0, 0.97)]), 2.0, position=(2.1 * (k % 2), 0.0))
        slab.rattle(0.05, seed=seed + k)
        out.append(_labelled(slab, g))
    return out


def mptrj_like(count: int, seed: int = 0) -> list:
    "Bulk cells of 16-40 atoms (SrTiO3 2x2x2, NaCl 2x2x1, Si 2x1x1, Fe 2x2x2), rattled."
    from ase.build import bulk
    from ase.spacegroup import crystal
    sto = crystal(["Sr", "Ti", "O"], [(0, 0, 0), (0.5, 0.5, 0.5), (0.5, 0.5, 0)], spacegroup=221, cellpar=[3.905] * 3 + [90] * 3)
    kinds = [sto.repeat((2, 2, 2)), bulk("NaCl", "rocksalt", a=5.64, cubic=True).repeat((2, 2, 1)),
             bulk("Si", cubic=True).repeat((2, 1, 1)), bulk("Fe", cubic=True).repeat((2, 2, 2))]
    g, out = np.random.default_rng(seed), []
    for k in range(count):
        a = kinds[k % len(kinds)].copy()
        a.rattle(0.05, seed=seed + k)
        out.append(_labelled(a, g))
    return out


def aspirins(count: int) -> list:
    from anids.data import datasets as D
    return D.load_md17("aspirin")[:count]


def structures_for(recipe: str, count: int, data_dir=None) -> tuple[list, str]:
    if recipe == "pretrain-paper":
        from anids.data.pretrain_data import load_qm9
        return load_qm9(split="train", max_structures=count, data_dir=data_dir, progress=False), "QM9 molecules, 18 atoms on average"
    if recipe == "oc22": return oc22_like(count), "MgO(100) slab + OH, 82 atoms"
    if recipe in ("mptrj", "mptrj-eqv2"): return mptrj_like(count), "bulk cells of 16-40 atoms (26 on average)"
    if recipe in ("rmd17-paper", "md17-paper", "rmd17-cpu", "md17-demo", "cpu-30min"): return aspirins(count), "bundled aspirin, 21 atoms"
    raise ValueError(f"no structures for recipe {recipe!r}; choose from {DEFAULT_RECIPES}")


def _sync(device: torch.device):
    if device.type == "cuda": torch.cuda.synchronize(device)


def recipe_config(recipe: str, **overrides):
    "The TrainConfig of a recipe; `pretrain-paper` = the pretrain recipe at the paper's PCQM4Mv2 scale."
    if recipe == "pretrain-paper":
        from anids.train.config import PRETRAIN_BUDGETS
        s = PRETRAIN_BUDGETS["paper"]
        return make_config("pretrain", backbone=s["backbone"], preset=s["backbone_preset"], batch_size=PRETRAIN_BATCH[0],
                           lr=s["lr"], sigma_p=s["sigma_p"], lambda_kl=s["lambda_kl"], lambda_gamma=s["lambda_gamma"],
                           ema_decay=0.0, **overrides)
    return make_config(recipe, **overrides)


def time_recipe(recipe: str, method: str, device: torch.device, warmup: int, steps: int, seed: int = 0,
                data_dir=None) -> dict:
    from torch_geometric.data import Batch
    bs = recipe_config(recipe).batch_size
    frames, what = structures_for(recipe, bs * 8, data_dir)
    cfg = recipe_config(recipe, method=method, seed=seed, progress=False,
                        **({"train_generator": True} if method != "none" else {}))
    torch.manual_seed(seed)
    module, cfg, frames, _ = prepare_training(frames, cfg)
    module.in_kl_warmup = False     # time the steps of Algorithm 2 (after the KL-only warm-up)
    model = module.model.to(device).train()
    opt = module.configure_optimizers()["optimizer"]
    params = [p for g in opt.param_groups for p in g["params"]]
    weights = module.current_weights()
    batches = [Batch.from_data_list(frames[k * bs:(k + 1) * bs]) for k in range(len(frames) // bs)]
    if device.type == "cuda": torch.cuda.reset_peak_memory_stats(device)
    times = []
    for k in range(warmup + steps):
        _sync(device)
        t0 = time.perf_counter()
        batch = batches[k % len(batches)].to(device)
        total, _ = model.losses(batch, module.noise_cfg, weights)
        opt.zero_grad(set_to_none=True)
        total.backward(inputs=params)
        if cfg.grad_clip: torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        opt.step()
        _sync(device)
        if k >= warmup: times.append(time.perf_counter() - t0)
    n_atoms = [int(b.num_nodes) for b in batches]
    return {"recipe": recipe, "method": method, "backbone": f"{cfg.backbone} {cfg.preset}", "force_mode": cfg.force_mode,
            "batch_size": bs, "structures": what, "atoms_per_batch": statistics.mean(n_atoms),
            "p": module.noise_cfg.p, "r": module.noise_cfg.r, "train_generator": module.noise_cfg.train_generator,
            "n_parameters_denoiser": count_parameters(model.denoiser), "n_parameters_generator": count_parameters(model.generator),
            "ms_per_step": 1000 * statistics.median(times), "mean_ms_per_step": 1000 * statistics.mean(times),
            "steps_per_s": 1 / statistics.median(times), "structures_per_s": bs / statistics.median(times),
            "min_ms": 1000 * min(times), "max_ms": 1000 * max(times), "steps": steps, "warmup_steps": warmup,
            "peak_gpu_memory_GiB": torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None}


def device_info(device: torch.device) -> dict:
    if device.type != "cuda": return {"device": "cpu", "threads": torch.get_num_threads()}
    p = torch.cuda.get_device_properties(device)
    return {"device": p.name, "memory_GiB": p.total_memory / 2**30, "multiprocessors": p.multi_processor_count,
            "cuda": torch.version.cuda}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--recipes", nargs="+", default=list(DEFAULT_RECIPES), help=f"recipes to time (default {' '.join(DEFAULT_RECIPES)})")
    ap.add_argument("--methods", nargs="+", default=["none", "anids"], help="noise methods (default none anids)")
    ap.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N (default cpu)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    ap.add_argument("--steps", type=int, default=10, help="timed steps (default 10)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--pretrain-batch-size", type=int, default=40,
                    help="structures per step of pretrain-paper (default 40: the paper's 160 over 4 GPUs)")
    ap.add_argument("--data-dir", default=None, help="where the QM9 geometry cache is, for pretrain-paper (anids.data.downloads.cache_dir)")
    ap.add_argument("--out", type=Path, default=None, help="results JSON (default results/bench_recipe_steps_<device>.json)")
    a = ap.parse_args(argv)
    for r in a.recipes:
        if r not in RECIPES and r != "pretrain-paper": ap.error(f"unknown recipe {r!r}; available: {sorted(RECIPES)}")
    if a.steps < 1 or a.warmup < 0: ap.error("--steps must be at least 1 and --warmup at least 0")
    device = torch.device(a.device)
    if a.pretrain_batch_size < 1: ap.error("--pretrain-batch-size must be positive")
    PRETRAIN_BATCH[0] = a.pretrain_batch_size
    if device.type == "cuda" and not torch.cuda.is_available(): ap.error("--device cuda: no CUDA device is visible to torch")
    torch.set_num_threads(a.threads)
    out = a.out or ROOT / "results" / f"bench_recipe_steps_{device.type}.json"
    res = {"ratios": {}, "rows": [], "device": device_info(device), "settings": {k: str(v) for k, v in vars(a).items()},
           "environment_before": environment()}
    print(f"{'recipe':12s} {'method':7s} {'backbone':24s} {'batch':>5s} {'atoms':>6s} {'ms/step':>9s} {'range':>17s} {'GPU GiB':>8s}")
    for recipe in a.recipes:
        rows = []
        for method in a.methods:
            if recipe == "pretrain-paper" and method == "none": continue
            row = time_recipe(recipe, method, device, a.warmup, a.steps, data_dir=a.data_dir)
            rows.append(row)
            mem = "" if row["peak_gpu_memory_GiB"] is None else f"{row['peak_gpu_memory_GiB']:.2f}"
            print(f"{recipe:12s} {method:7s} {row['backbone']:24s} {row['batch_size']:5d} {row['atoms_per_batch']:6.0f} "
                  f"{row['ms_per_step']:9.1f} {row['min_ms']:8.1f}-{row['max_ms']:<8.1f} {mem:>8s}", flush=True)
        base = next((r["ms_per_step"] for r in rows if r["method"] == "none"), None)
        for r in rows: r["over_none"] = r["ms_per_step"] / base if base else None
        res["rows"] += rows
        res["ratios"].update({f"{recipe}: {r['method']} / none": r["over_none"] for r in rows if r["method"] != "none" and base})
        res["environment_after"] = environment()
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res, indent=2))
    print("wrote", out)


if __name__ == "__main__":
    main()
