"""Epoch time of AniDS fine-tuning relative to training without noise, side by side in one process.

    python benchmarks/bench_overhead.py                     # bundled ethanol (offline), PaiNN demo, 2 threads
    python benchmarks/bench_overhead.py --train my.xyz --threads 1
    python benchmarks/bench_overhead.py --rounds 0 --interleaved-epochs 0 --out ops.json   # operator counts only
    python benchmarks/bench_overhead.py --molecule aspirin --batch-size 32 --out results/bench_overhead_aspirin_b32.json
    python benchmarks/bench_overhead.py --backbone equiformer_v2 --preset rmd17 --molecule aspirin --n 50 --batch-size 2 \
        --frozen-from untrained --rounds 0 --out results/bench_overhead_equiformer_v2_rmd17.json   # the paper's cost table
    python benchmarks/bench_overhead.py ... --device cuda --no-count-ops   # the same on a GPU (the paper's table is an H100's)

Three runs on the same structures, backbone and recipe (md17-demo; PaiNN demo unless `--backbone` / `--preset` say
otherwise): no noise; AniDS with psi frozen (`--frozen-from`: the shipped QM9 pre-trained generator by default; its
Sigma_i cached once before training, reported separately); AniDS with psi trained jointly (Algorithm 2 from scratch).
A backbone without a shipped generator (EquiformerV2, the backbone of the paper's cost table: `--backbone equiformer_v2
--preset rmd17`, 50 aspirins, batch 2) is timed with `--frozen-from untrained`: a checkpoint of the same model with its
generator at its initial weights, written for this benchmark only. What a frozen step costs does not depend on psi's
weights (its covariances are cached before training and each step reads them), so the timing is that of a pre-trained
one; the fits it makes are not meant to be used. Two measurements:

- Lightning epochs (`ratios`): each run is a whole `anids.train.fit`; its seconds per epoch are the median over its
  epochs after the first. The three runs alternate `--rounds` times and the ratios are the medians of the per-round
  ratios. On a shared virtual machine the speed of the CPU drifts by tens of percent over tens of seconds (measured
  here: the same run 31 and 40 ms per step a minute apart), which a run-by-run comparison cannot cancel.
- Interleaved steps (`ratios_interleaved`): the three runs are prepared exactly as `fit` prepares them
  (`anids.train.prepare_training`: the same model, pretrained weights, frozen or trained psi, cached covariances) and
  their training steps (loss, backward, gradient clipping, fused AdamW, the EMA of the trainable weights, the joint
  run's generator statistics every NOISE_STATS_EVERY-th step) run one after the other, step by step, in a rotating
  order; an epoch's time is the sum of its steps and data loading. A drift of the machine then hits the three alike.
  What this leaves out is Lightning's own per-step bookkeeping, the same for the three runs.

And one count (`operators`): the operators each run dispatches per step over the same 30 batches (an epoch's, if fewer; `dispatched_ops`),
which no load of the machine changes. At this size a step's time goes with its number of operator calls more than with
its arithmetic, so the count shows where an overhead comes from even on a busy machine.

The size of a batch decides which of the two a step is bound by: batches of 8 ethanols (72 atoms, the default) are
bound by operator calls, whose number the noise raises by about 17 % (frozen) and 70 % (joint); batches of 32
aspirins (672 atoms; `--molecule aspirin --batch-size 32`, the molecule of the paper's cost table) by arithmetic,
where the frozen run's extra operators cost about 1 % and the joint run still pays for psi on the corrupted
structures and for the gradient through the noisy positions.

Writes results/bench_overhead.json: the ratios first, then the runs, and the machine, load, threads and package
versions before and after (benchmarks/_env.py)."""
import argparse, json, os, statistics, sys, tempfile, time
from pathlib import Path

# OpenMP's wait policy is read when torch loads: PASSIVE unless the environment says otherwise (spinning threads on a
# shared 2-core machine make every parallel op wait; see bench_equiformer_v2.py)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch   # noqa: E402
from lightning.pytorch.callbacks import Callback

from anids.data import datasets as D
from anids.train import make_config, fit, prepare_training, NOISE_STATS_EVERY
from anids.train.module import _TrainableAveragedModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import environment, load_warning   # noqa: E402


class EpochTimer(Callback):
    def __init__(self): self.times, self._t = [], None
    def on_train_epoch_start(self, trainer, module): self._t = time.perf_counter()
    def on_train_epoch_end(self, trainer, module): self.times.append(time.perf_counter() - self._t)


RUNS = {"none": dict(method="none", pretrained=None), "anids_frozen_cached": dict(method="anids", pretrained="qm9"),
        "anids_joint": dict(method="anids", pretrained=None)}
FROZEN = "qm9"   # what the frozen runs start from (main sets it from --frozen-from)
ACCELERATOR = {"cpu": "cpu", "cuda": "gpu"}   # --device -> Lightning's accelerator
MODEL = {}       # backbone, preset and generator preset overrides of the md17-demo recipe (main sets them)


def _pretrained(r: dict):
    "The frozen runs' weights: FROZEN in place of the default 'qm9'."
    return FROZEN if r["pretrained"] == "qm9" else r["pretrained"]


def untrained_generator_checkpoint(path, backbone: str, preset: str, generator_preset: str|None) -> str:
    """A checkpoint of an AniDS model whose generator keeps its initial weights, for timing a frozen psi on a backbone
    that has no pre-trained one (the cost of a frozen step does not depend on psi's weights). Not for training."""
    from anids.method.model import build_model
    from anids.method.checkpoints import save_model
    torch.manual_seed(0)
    spec = dict(backbone=backbone, preset=preset, method="anids")
    if generator_preset: spec["generator_preset"] = generator_preset
    save_model(build_model(**spec), path, extra={"purpose": "timing a frozen generator (bench_overhead.py); psi is untrained"})
    return str(path)


CONTROLS = {  # extra interleaved runs that take one piece of the frozen run's work away
    "p0": ("anids_frozen_cached_p0", dict(method="anids", pretrained="qm9", p=0.0)),
    "no_force_encoding": ("anids_frozen_cached_no_fenc", dict(method="anids", pretrained="qm9", force_encoding=False)),
}


def interleaved(train, threads: int, epochs: int, seed: int = 0, control: bool = False, fenc_control: bool = False,
                batch_size: int|None = None, device: str = "cpu") -> dict:
    """Epoch times of the three runs with their training steps interleaved one by one (see the module docstring).
    `control`: a fourth run, psi frozen and cached but no structure ever corrupted (p = 0), which shows what the
    cached covariances and the generator's presence cost by themselves. `fenc_control`: a run like the frozen one
    without DeNS's force encoding of the corrupted atoms (not the paper's method: it shows what the encoding costs).
    `device`: where the models train (the covariances of a frozen psi are cached on the CPU first, as `fit` does;
    each batch is moved to the device inside its step, and on a GPU the clock is read after a synchronisation)."""
    dev = torch.device(device)
    sync = (lambda: torch.cuda.synchronize(dev)) if dev.type == "cuda" else (lambda: None)
    from torch_geometric.loader import DataLoader
    wanted = [k for k, on in (("p0", control), ("no_force_encoding", fenc_control)) if on]
    runs, todo = {}, {**RUNS, **{CONTROLS[k][0]: CONTROLS[k][1] for k in wanted}}
    for name, r in todo.items():
        cfg = make_config("md17-demo", method=r["method"], epochs=epochs, threads=threads, progress=False, seed=seed,
                          **{k: r[k] for k in ("p", "force_encoding") if k in r}, **_batch(batch_size), **MODEL)
        torch.manual_seed(seed)
        module, cfg, ts, _ = prepare_training(train, cfg, _pretrained(r))
        module.model.to(dev)
        opt = module.configure_optimizers()["optimizer"]
        ema = _TrainableAveragedModel(module.model, cfg.ema_decay) if cfg.ema_decay > 0 else None
        params = [p for g in opt.param_groups for p in g["params"]]
        runs[name] = (module, ts, opt, ema, params, cfg)
    names, epoch_s = list(runs), {name: [] for name in runs}
    for ep in range(epochs):
        its = {}
        for name, (module, ts, *_) in runs.items():
            its[name] = iter(DataLoader(ts, batch_size=module.cfg.batch_size, shuffle=True,
                                        generator=torch.Generator().manual_seed(1000 * seed + ep)))
        spent, k, done = dict.fromkeys(names, 0.0), 0, False
        while not done:
            for name in names[k % len(names):] + names[:k % len(names)]:
                module, ts, opt, ema, params, cfg = runs[name]
                sync()
                t0 = time.perf_counter()
                batch = next(its[name], None)
                if batch is None: done = True; break
                batch = batch.to(dev)
                stats = {} if module.noise_cfg.train_generator and k % NOISE_STATS_EVERY == 0 else None
                total, _ = module.model.losses(batch, module.noise_cfg, module.current_weights(), stats=stats)
                opt.zero_grad(set_to_none=True)
                total.backward(inputs=params)   # as AniDSModule.backward: the trained weights' gradients only
                if cfg.grad_clip: torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
                opt.step()
                if ema is not None: ema.update_parameters(module.model)
                sync()
                spent[name] += time.perf_counter() - t0
            k += 1
        for name in names: epoch_s[name].append(spent[name])
        print(f"interleaved epoch {ep + 1}/{epochs}: " + ", ".join(f"{n} {spent[n]:.2f} s" for n in names), flush=True)
    per_epoch = [{"frozen_cached_over_none": epoch_s["anids_frozen_cached"][e] / epoch_s["none"][e],
                  "joint_over_none": epoch_s["anids_joint"][e] / epoch_s["none"][e],
                  **{f"frozen_cached_{k}_over_none": epoch_s[CONTROLS[k][0]][e] / epoch_s["none"][e] for k in wanted}}
                 for e in range(1, epochs)]
    return {"ratios": {key: statistics.median(r[key] for r in per_epoch) for key in per_epoch[0]},
            "ratios_by_epoch": per_epoch, "epoch_seconds": epoch_s, "epochs": epochs,
            "note": "ratios: medians over the epochs after the first"}


def _batch(batch_size: int|None) -> dict:
    "The recipe's batch size (md17-demo: 8) unless one is given."
    return {} if batch_size is None else {"batch_size": batch_size}


def dispatched_ops(train, steps: int = 30, seed: int = 0, batch_size: int|None = None) -> dict:
    """Operators each run dispatches per training step (forward, backward, optimiser), counted over the same `steps`
    batches. Unlike a time, the count does not depend on the machine's load: at this size (a few hundred atoms per
    batch) nearly every operator costs its fixed dispatch and autograd bookkeeping, so the step times go with it."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch_geometric.loader import DataLoader

    class Count(TorchDispatchMode):
        n = 0
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.n += 1
            return func(*args, **(kwargs or {}))

    out = {}
    for name, r in RUNS.items():
        cfg = make_config("md17-demo", method=r["method"], epochs=1, threads=1, progress=False, seed=seed, **_batch(batch_size),
                          **MODEL)
        torch.manual_seed(seed)
        module, cfg, ts, _ = prepare_training(train, cfg, _pretrained(r))
        opt = module.configure_optimizers()["optimizer"]
        params = [p for g in opt.param_groups for p in g["params"]]
        loader = DataLoader(ts, batch_size=cfg.batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed))
        rng = torch.Generator().manual_seed(seed)   # the same corruption masks and noise draws for every run
        counts, done = {"forward": 0, "backward": 0, "optimiser": 0}, 0
        for k, batch in zip(range(steps), loader):   # fewer than `steps` when an epoch has fewer batches
            done += 1
            with Count() as c:
                total, _ = module.model.losses(batch, module.noise_cfg, module.current_weights(), rng=rng)
                n_fwd = c.n
                opt.zero_grad(set_to_none=True); total.backward(inputs=params)
                n_bwd = c.n - n_fwd
                opt.step()
            counts["forward"] += n_fwd; counts["backward"] += n_bwd; counts["optimiser"] += c.n - n_fwd - n_bwd
        out[name] = {k: v / done for k, v in counts.items()} | {"total": sum(counts.values()) / done}
    base = out["none"]["total"]
    return {"per_step": out, "steps": done,
            "ratios": {"frozen_cached_over_none": out["anids_frozen_cached"]["total"] / base,
                       "joint_over_none": out["anids_joint"]["total"] / base}}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train", help="extxyz with energies and forces (default: the bundled --molecule)")
    p.add_argument("--molecule", default="ethanol", help="bundled MD17 molecule when no --train is given (default ethanol)")
    p.add_argument("--batch-size", type=int, default=None, help="batch size (default: the md17-demo recipe's, 8)")
    p.add_argument("--backbone", default=None, help="backbone (default: the md17-demo recipe's, painn)")
    p.add_argument("--preset", default=None, help="backbone preset (default: the md17-demo recipe's, demo)")
    p.add_argument("--generator-preset", default=None, help="preset of psi's encoder (default: the recipe's)")
    p.add_argument("--frozen-from", default="qm9",
                   help="weights of the frozen runs: 'qm9' (the shipped pre-trained generator of the backbone and preset), "
                        "a checkpoint path, or 'untrained' (a checkpoint written for timing only; see above)")
    p.add_argument("--n", type=int, default=400, help="training structures (default 400)")
    p.add_argument("--epochs", type=int, default=4, help="epochs per run; the first is not timed (default 4)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--device", default="cpu", help="cpu | cuda (default cpu); the Lightning rounds then use accelerator 'gpu'")
    p.add_argument("--rounds", type=int, default=3, help="the three runs alternate this many times (default 3; 0: skip)")
    p.add_argument("--interleaved-epochs", type=int, default=6, help="epochs of the interleaved-steps measurement (0: skip)")
    p.add_argument("--force-encoding-control", action="store_true",
                   help="interleave a run like the frozen one without the force encoding (what the encoding costs)")
    p.add_argument("--uncorrupted-control", action="store_true",
                   help="interleave a fourth run: psi frozen and cached, p = 0 (nothing corrupted)")
    p.add_argument("--count-ops", action=argparse.BooleanOptionalAction, default=True,
                   help="also count the operators each run dispatches per step (load-independent; default on)")
    p.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "results" / "bench_overhead.json"))
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    if dev.type not in ACCELERATOR: p.error(f"--device must be cpu or cuda[:N], got {a.device!r}")
    if dev.type == "cuda" and not torch.cuda.is_available(): p.error("--device cuda: no CUDA device is visible to torch")
    if a.batch_size is not None and a.batch_size < 1: p.error(f"--batch-size must be positive, got {a.batch_size}")
    global FROZEN
    MODEL.update({k: v for k, v in (("backbone", a.backbone), ("preset", a.preset), ("generator_preset", a.generator_preset))
                  if v is not None})
    tmp = tempfile.TemporaryDirectory()
    if a.frozen_from == "untrained":
        c = make_config("md17-demo", **MODEL)
        FROZEN = untrained_generator_checkpoint(Path(tmp.name) / "untrained_generator.pt", c.backbone, c.preset, c.generator_preset)
    else:
        FROZEN = a.frozen_from
    frames = D.read_structures(a.train) if a.train else D.load_md17(a.molecule)
    if len(frames) < a.n + 1: p.error(f"{len(frames)} structures; --n {a.n} needs at least {a.n + 1} (one for validation)")
    train, val = frames[:a.n], frames[a.n:a.n + 20]
    runs = RUNS
    env_before = environment()
    res = {name: {"seconds_per_epoch_by_round": [], "epoch_times_s": []} for name in runs}
    per_round = []
    for rnd in range(a.rounds):   # the three runs alternate, so a change of load hits all of them alike
        for name, r in runs.items():
            timer = EpochTimer()
            cfg = make_config("md17-demo", method=r["method"], epochs=a.epochs, threads=a.threads, progress=False,
                              check_val_every_n_epoch=a.epochs, seed=rnd, accelerator=ACCELERATOR[dev.type],
                              **_batch(a.batch_size), **MODEL)
            with tempfile.TemporaryDirectory() as d:
                m = fit(train, val, cfg, d, pretrained=_pretrained(r), callbacks=[timer])
            res[name]["seconds_per_epoch_by_round"].append(statistics.median(timer.times[1:]))
            res[name]["epoch_times_s"].append(timer.times)
            res[name].update(train_generator=m["config"]["train_generator"], covariance_cache_s=m["extra"].get("covariance_cache_s"))
            print(f"round {rnd + 1}/{a.rounds} {name:22s} {res[name]['seconds_per_epoch_by_round'][-1]:.3f} s/epoch  "
                  f"(epochs {', '.join(f'{t:.2f}' for t in timer.times)})", flush=True)
        base = res["none"]["seconds_per_epoch_by_round"][-1]
        per_round.append({"frozen_cached_over_none": res["anids_frozen_cached"]["seconds_per_epoch_by_round"][-1] / base,
                          "joint_over_none": res["anids_joint"]["seconds_per_epoch_by_round"][-1] / base})
    ratios = None
    if per_round:   # --rounds 0 skips the Lightning runs
        for name in res: res[name]["seconds_per_epoch"] = statistics.median(res[name]["seconds_per_epoch_by_round"])
        ratios = {k: statistics.median([r[k] for r in per_round]) for k in per_round[0]}
        print(f"ratios (median over {a.rounds} rounds): frozen (cached) / none = {ratios['frozen_cached_over_none']:.3f}; "
              f"joint / none = {ratios['joint_over_none']:.3f}")
    inter = (interleaved(train, a.threads, a.interleaved_epochs, control=a.uncorrupted_control, fenc_control=a.force_encoding_control,
                         batch_size=a.batch_size, device=a.device)
             if a.interleaved_epochs > 1 else None)
    if inter:
        print(f"ratios, interleaved steps (median over {a.interleaved_epochs - 1} epochs): frozen (cached) / none = "
              f"{inter['ratios']['frozen_cached_over_none']:.3f}; joint / none = {inter['ratios']['joint_over_none']:.3f}"
              + (f"; frozen, p = 0 / none = {inter['ratios']['frozen_cached_p0_over_none']:.3f}" if a.uncorrupted_control else "")
              + (f"; frozen, no force encoding / none = {inter['ratios']['frozen_cached_no_force_encoding_over_none']:.3f}"
                 if a.force_encoding_control else ""))
    ops = dispatched_ops(train, batch_size=a.batch_size) if a.count_ops else None
    if ops:
        print("operators per step: " + ", ".join(f"{n} {v['total']:.0f} (forward {v['forward']:.0f}, backward {v['backward']:.0f})"
                                                for n, v in ops["per_step"].items())
              + f"; frozen (cached) / none = {ops['ratios']['frozen_cached_over_none']:.3f}, joint / none = "
                f"{ops['ratios']['joint_over_none']:.3f}")
    env_after = environment()
    cfg0 = make_config("md17-demo", **_batch(a.batch_size), **MODEL)
    if (w := load_warning(env_before, env_after)): print(w)
    out = {"ratios": ratios, "ratios_interleaved": inter["ratios"] if inter else None, "ratios_by_round": per_round,
           "interleaved": inter, "operators": ops, "targets": {"frozen_cached_over_none": 1.03, "joint_over_none": 1.15},
           "runs": res, "settings": vars(a), "n_train": len(train), "backbone": f"{cfg0.backbone} {cfg0.preset}", "generator_preset": cfg0.generator_preset,
           "frozen_from": a.frozen_from,
           "data": a.train or f"bundled {a.molecule}", "atoms_per_structure": int(train[0].num_nodes),
           "batch_size": cfg0.batch_size, "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
           "environment_before": env_before, "environment_after": env_after}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1))
    print("wrote", a.out)


if __name__ == "__main__":
    main()
