"""Training steps of fixed shapes (`anids.train.fast`) against today's eager step, side by side on one device.

    python benchmarks/bench_fast_step.py                                  # CPU, 1 thread, bundled ethanol, cpu-30min
    python benchmarks/bench_fast_step.py --device cuda --out results/bench_fast_step_h200.json
    python benchmarks/bench_fast_step.py --device cuda --methods none anids --epochs 5 --profile
    python benchmarks/bench_fast_step.py --device cuda --recipe rmd17-paper --molecule aspirin --n 50 --pretrained '' --train-generator true
    python benchmarks/bench_fast_step.py --device cuda --recipe pretrain-paper --molecule all --n 800 --methods dens anids
    python benchmarks/bench_fast_step.py --device cuda --recipe mptrj --n 400 --pretrained '' --methods none anids
    python benchmarks/bench_fast_step.py --recipe mptrj --n 96 --batch-size 8 --size-buckets 3 --pretrained ''   # batches of similar size
    python benchmarks/bench_fast_step.py --recipe pretrain --molecule qm9 --n 3200 --batch-size 64 --methods dens anids --compiled --size-buckets 4
    python benchmarks/bench_fast_step.py --recipe oc22 --n 2 --methods none --pretrained '' --threads 2 --check-only   # 20 nearest within 12 A

The recipe is `cpu-30min` (PaiNN demo, batches of 8 ethanols) unless `--recipe` says otherwise; DeNS and AniDS start
from the shipped QM9 pre-trained weights with psi frozen and its Sigma_i cached, as in the headline runs. For each
noise method three paths train copies of the same model:

- `eager`: the step of `anids.train.fit` without Lightning's bookkeeping: a collated torch_geometric batch moved to the
  device, `AniDSModel.losses` on radius graphs, the backward pass to the trained weights, fused AdamW;
- `fixed`: `FastStep` without capture: the structures kept on the device, a complete graph (molecules) or neighbour
  lists with a skin (periodic cells: `--recipe mptrj`, `oc22`, on made-up cells of their kind), no host synchronisation;
- `captured` (CUDA only): `FastStep`'s forward and backward pass recorded once in a CUDA graph and replayed.
- `compiled` (`--compiled`): `FastStep(compiled=True)`, the fixed step traced by torch.compile (forces by torch.func).

Measured: the median milliseconds per step over `--steps` steps after `--warmup`; then `--epochs` whole epochs of each
path as a run trains them (lambda_denoise decay, learning-rate schedule, EMA of the weights), extrapolated to the
recipe's epochs. Checked on the device: the fixed step's loss and gradients against the eager step's (the same random
draws), and the captured pass's against the uncaptured one's, without noise (deterministic) and with it (equal where
the CUDA graph replays the random stream as eager kernels draw it). The optimiser step (clipping, fused AdamW) and the
EMA run eagerly after each pass, in every path. With `--size-buckets K` every path draws
its batches from K groups of structures of similar size (TrainConfig.size_buckets), and the fast paths keep one
fixed-shape set and step per group, padded to that group's largest structure. `--profile` adds the
operators that take the most time in 10 steps of each path; `--fit-epochs N` times N epochs of a whole `fit` (Lightning's
loop) with and without `fast_step`. `--baseline REV` first runs the same benchmark on the code of git revision REV (a
temporary worktree, its own copy of this script) and writes its times beside these, with each path's ratio to REV's
eager step: a change that speeds up the model itself shows there, not in the ratios to this code's eager step. Writes the results JSON with the GPU, driver, torch and
CUDA versions, and the machine before and after (benchmarks/_env.py)."""
import argparse, copy, json, os, statistics, subprocess, sys, time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch   # noqa: E402
from torch_geometric.data import Batch   # noqa: E402
from torch_geometric.loader import DataLoader   # noqa: E402

from anids.data import datasets as D   # noqa: E402
from anids.train import make_config, prepare_training   # noqa: E402
from anids.train.module import LR_SCHEDULES, _TrainableAveragedModel   # noqa: E402
from anids.train.fast import FastStep   # noqa: E402
from anids.train.fast import training_indices, size_buckets   # noqa: E402
from anids.method.model import DenoisingConfig   # noqa: E402
from anids.method.losses import LossWeights   # noqa: E402
from anids.nn.fixed_shapes import sync_free   # noqa: E402
from dataclasses import replace   # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import environment, load_warning   # noqa: E402
from bench_recipe_steps import recipe_config, structures_for   # noqa: E402  (the recipes, and pretrain-paper: Algorithm 1 at the PCQM4Mv2 scale)

PERIODIC_RECIPES = ("mptrj", "mptrj-eqv2", "oc22")
"The recipes whose structures are periodic cells: `--recipe` then trains on made-up cells of that kind (bench_recipe_steps)."


def attempt(fn, *args) -> dict:
    "fn(*args), or {'error': ...} where it raises: one path that fails on a device must not cost the others' numbers."
    try:
        return fn(*args)
    except Exception as e:   # reported in the results file and printed, never passed off as a measurement
        import traceback
        print(f"{getattr(fn, '__name__', fn)} failed: {type(e).__name__}: {e}", flush=True)
        return {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-4000:]}


def write(out: dict, dest: Path) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(out, indent=1) + "\n")


def sync(device):
    if device.type == "cuda": torch.cuda.synchronize(device)


def gpu_info(device) -> dict:
    if device.type != "cuda": return {"device": "cpu", "threads": torch.get_num_threads()}
    p = torch.cuda.get_device_properties(device)
    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        driver = None
    return {"device": p.name, "memory_GiB": round(p.total_memory / 2**30, 1), "multiprocessors": p.multi_processor_count,
            "driver": driver, "cuda": torch.version.cuda, "torch": torch.__version__, "cudnn": torch.backends.cudnn.version()}


class Groups:
    """The training structures as fixed-shape sets: one set of all of them, or one per size group (`--size-buckets`,
    anids.train.fast.SizeBuckets, as `fit` with TrainConfig.size_buckets draws them)."""
    def __init__(self, train, module, cfg, device, buckets: int, streamed: bool = False):
        self.frames, self.B, self.device = train, cfg.batch_size, device
        # as fit draws them; streamed neighbour lists: each batch's built on the host in the loop (a loader without workers)
        run = replace(cfg, fast_step=True, size_buckets=buckets, neighbour_lists="streamed" if streamed else "stored")
        self.indices = training_indices(train, run, module.model, size_buckets(train, run))
        self.buckets = self.indices.buckets
        self.sets = self.indices.fixed_shape_sets(module.model, device, next(module.model.parameters()).dtype, cfg.neighbour_skin)
        self.steps_per_epoch = len(self.buckets) if self.buckets else len(train) // cfg.batch_size

    def eager_batches(self, generator):
        "One epoch of collated batches on the host, as fit's DataLoader draws them."
        if self.buckets is None:
            return iter(DataLoader(self.frames, batch_size=self.B, shuffle=True, drop_last=True, generator=generator))
        return iter(DataLoader(self.frames, batch_sampler=self.buckets))

    def fixed_batches(self):
        "One epoch of (group, indices on the device[, the batch's streamed lists])."
        if self.buckets is None:
            batches = (self.indices.collate(index.tolist()) for index in self.sets[0].epoch(self.B))
        else: batches = map(self.indices.collate, self.buckets)
        return ((b[0], b[1].to(self.device), *b[2:]) for b in batches)

    def describe(self) -> list[dict]:
        "Each set's shape: atom slots, padding, its graph."
        return [{"structures": len(fs), "slots": fs.slots, "padded": fs.padded, "mean_atoms": float(fs.sizes.double().mean()),
                 "graph": "complete" if fs.lists is None else {
                     "neighbour_lists": True, "cutoff": fs.lists.cutoff, "skin": fs.lists.skin,
                     "edges_per_structure": fs.lists.edges, "mean_real_edges": float(fs.lists.counts.double().mean()),
                     "bytes_per_structure": fs.lists.nbytes / len(fs.lists)}}
                for fs in self.sets]


class Path_:
    "One way of training: a model copy, its optimiser, schedule and EMA, and a `step(index)`."
    def __init__(self, kind, module, cfg, frames, groups, device, steps_per_epoch):
        self.kind, self.device, self.cfg = kind, device, cfg
        self.model = copy.deepcopy(module.model).to(device).train()
        self.noise_cfg, self.frames, self.B = module.noise_cfg, frames, cfg.batch_size
        self.opt = _module_optimizer(module, self.model)    # fused AdamW, as fit's
        self.params = [p for g in self.opt.param_groups for p in g["params"]]
        self.total = max(1, cfg.epochs * steps_per_epoch)
        warm = int(round(cfg.warmup_epochs * steps_per_epoch))
        sched = LR_SCHEDULES[cfg.lr_schedule]
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lambda s: sched(s, self.total, warm, cfg.min_lr_ratio))
        self.ema = _TrainableAveragedModel(self.model, cfg.ema_decay) if cfg.ema_decay > 0 else None
        self.weights = module.base_weights
        self.n = 0
        self.gradient_hook = None   # called with the parameters between the pass and the optimiser step
        if kind != "eager":   # one FastStep (one CUDA graph) per size group
            self.fast = [FastStep(self.model, fs, self.B, self.noise_cfg, self.weights, self.params, capture=kind == "captured",
                                  compiled=kind == "compiled")
                         for fs in groups.sets]

    def lambda_denoise(self) -> float:
        w = self.weights.lambda_denoise
        return w * max(0.0, 1.0 - self.n / self.total) if self.cfg.denoise_decay else w

    def step(self, index):
        "One training step on the structures `index` (a CPU batch for eager, (group, device indices) otherwise)."
        if self.kind == "eager":
            batch = index.to(self.device)
            w = LossWeights(**{**self.weights.__dict__, "lambda_denoise": self.lambda_denoise()})
            total, _ = self.model.losses(batch, self.noise_cfg, w)
            self.opt.zero_grad(set_to_none=True)
            total.backward(inputs=self.params)
        else:
            group, index, *lists = index
            self.fast[group].set_lambda_denoise(self.lambda_denoise())
            total, _ = self.fast[group](index, lists[0] if lists else None)
        if self.gradient_hook is not None: self.gradient_hook(self.params)   # e.g. bench_two_cores.py's all-reduce
        if self.cfg.grad_clip: torch.nn.utils.clip_grad_norm_(self.params, self.cfg.grad_clip)
        self.opt.step()
        self.sched.step()
        if self.ema is not None: self.ema.update_parameters(self.model)
        self.n += 1
        return total

    def batches(self, groups, generator):
        "One epoch of batches: collated on the host (eager, as the DataLoader of fit) or indices on the device."
        return groups.eager_batches(generator) if self.kind == "eager" else iter(groups.fixed_batches())


def _module_optimizer(module, model):
    "The optimiser `AniDSModule.configure_optimizers` makes, for `model` (a copy of the module's)."
    original = module.model
    module.model = model
    try:
        return module.configure_optimizers()["optimizer"]
    finally:
        module.model = original


def median_step_ms(path, groups, device, warmup, steps) -> dict:
    gen = torch.Generator().manual_seed(0)
    it, times = path.batches(groups, gen), []
    for k in range(warmup + steps):
        try: b = next(it)
        except StopIteration:
            it = path.batches(groups, gen); b = next(it)
        sync(device)
        t0 = time.perf_counter()
        path.step(b)
        sync(device)
        if k >= warmup: times.append(time.perf_counter() - t0)
    return {"ms_per_step": 1000 * statistics.median(times), "min_ms": 1000 * min(times), "max_ms": 1000 * max(times),
            "steps": steps, "warmup_steps": warmup}


def epoch_seconds(path, groups, device, epochs) -> dict:
    gen = torch.Generator().manual_seed(1)
    per_epoch = []
    for _ in range(epochs):
        sync(device)
        t0 = time.perf_counter()
        for b in path.batches(groups, gen): path.step(b)
        sync(device)
        per_epoch.append(time.perf_counter() - t0)
    return {"s_per_epoch": statistics.median(per_epoch), "epochs_timed": epochs, "all_s": per_epoch}


def streamed_lists(fs, index):
    "The lists of the batch `index` where the set streams them (built on the host), else None."
    return fs.lists.builder.build(index.tolist()) if fs.lists is not None and fs.lists.streamed else None


def check_fixed_against_eager(module, frames, fs, device) -> dict:
    """Loss and gradients of one step, eager (radius graphs) and fixed (complete graph, sync_free), same draws (p = 1).
    A padded set draws noise for its padding atoms too, so its draws cannot be the eager step's: there the check is the
    clean prediction (energies, the real atoms' forces) and psi's Sigma_i of the real atoms (the CPU tests compare
    the padded step's losses and gradients with given draws). In eval mode, without edge chunks: dropout and
    stochastic depth (EquiformerV2's presets) would draw different random numbers in the two steps."""
    model = copy.deepcopy(module.model).to(device).eval().set_edge_chunk_size(None)
    index = torch.arange(module.cfg.batch_size)
    if streamed_lists(fs, index) is not None: fs.lists.load(streamed_lists(fs, index))
    if fs.padded:
        plain = Batch.from_data_list([frames[int(k)] for k in index]).to(device)
        padded = fs.batch(index.to(device))
        real, graph = padded.atom_mask, padded.graph
        stress = padded.cell is not None and model.predicts_stress and module.cfg.lambda_stress + module.cfg.lambda_stress_iso + module.cfg.lambda_stress_aniso > 0
        p0, p1 = model.predict(plain, compute_stress=stress), model.predict(padded, graph=graph, compute_stress=stress)
        out = {"check": "padded: clean prediction and Sigma_i of the real atoms",
               "energy_rel_diff": float((p0.energy - p1.energy).detach().norm() / p0.energy.detach().norm()),
               "force_rel_diff": float((p0.forces - p1.forces[real]).detach().norm() / p0.forces.detach().norm())}
        if stress: out["stress_rel_diff"] = float((p0.stress - p1.stress).detach().norm() / p0.stress.detach().norm())
        if model.generator.learned:
            with torch.no_grad():
                c0, c1 = model.covariance(plain), model.covariance(padded, graph)
            out["sigma_rel_diff"] = float((c0.matrix - c1.matrix[real]).norm() / c0.matrix.norm())
        return out
    cfg = DenoisingConfig(**{**module.noise_cfg.__dict__, "p": 1.0})
    out = []
    for fixed in (False, True):
        model.zero_grad(set_to_none=True)
        torch.manual_seed(123)
        if fixed:
            batch = fs.batch(index.to(device))
            with sync_free() as checks:
                total, _ = model.losses(batch, cfg, module.base_weights, graph=batch.graph)
            checks.raise_if_failed()
        else:
            total, _ = model.losses(Batch.from_data_list([frames[int(k)] for k in index]).to(device), cfg, module.base_weights)
        total.backward()
        g = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).flatten() for p in model.parameters()])
        out.append((total.detach().double(), g.double()))
    (t0, g0), (t1, g1) = out
    return {"loss_eager": float(t0), "loss_fixed": float(t1), "loss_rel_diff": float((t0 - t1).abs() / t0.abs()),
            "grad_rel_diff": float((g0 - g1).norm() / g0.norm())}


def check_captured(module, fs, device, with_noise: bool) -> dict:
    """Loss and gradients of one pass, recorded in a CUDA graph and not, from the same weights and structures: equal
    without noise (deterministic), and with it where the graph replays the random stream as eager kernels draw it.
    In eval mode (no dropout), without edge chunks."""
    model = copy.deepcopy(module.model).to(device).eval().set_edge_chunk_size(None)
    cfg = module.noise_cfg if with_noise else DenoisingConfig(**{**module.noise_cfg.__dict__, "p": 0.0})
    params = [p for p in model.parameters() if p.requires_grad]
    index = torch.arange(module.cfg.batch_size, device=device)
    out = []
    for capture in (True, False):
        step = FastStep(model, fs, len(index), cfg, module.base_weights, params, capture=capture)
        if capture:
            if streamed_lists(fs, index) is not None: fs.lists.load(streamed_lists(fs, index))
            step.index.copy_(index); step.record()    # its warm-up draws random numbers: record before seeding
        torch.cuda.manual_seed(7)
        total, _ = step(index, streamed_lists(fs, index))
        sync(device)
        g = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).flatten() for p in params])
        out.append((total.double().clone(), g.double().clone()))
    (t0, g0), (t1, g1) = out
    return {"noise": with_noise, "loss_captured": float(t0), "loss_eager": float(t1),
            "loss_rel_diff": float((t0 - t1).abs() / t1.abs()), "grad_rel_diff": float((g0 - g1).norm() / g1.norm())}


def fit_epochs(frames, n_train: int, recipe: str, method: str, pretrained, device, epochs: int, fast: bool) -> dict:
    "Seconds per epoch of a whole `anids.train.fit` (Lightning's loop, EMA, logging), with or without fast_step."
    import tempfile
    from anids.train import fit
    cfg = make_config(recipe, method=method, epochs=epochs, seed=0, progress=False, fast_step=fast,
                      accelerator="gpu" if device.type == "cuda" else "cpu", check_val_every_n_epoch=epochs)
    with tempfile.TemporaryDirectory() as d:
        m = fit(frames[:n_train], frames[n_train:n_train + 50], cfg, d, pretrained=pretrained)
    times = m["epoch_times_s"]
    inner = times[1:-1] or times   # the first loads and records; the last validates
    return {"fast_step": fast, "epochs": epochs, "epoch_times_s": times, "s_per_epoch": statistics.median(inner),
            "recipe_minutes": statistics.median(inner) * make_config(recipe).epochs / 60,
            "val_force_mae_meV_A": m["val"]["force_mae_meV_A"]}


def profile(path, groups, device, steps=10) -> dict:
    """The operators of `steps` steps (after 3 more): `aten_calls_per_step`, every aten operator call per step (nested
    ones counted too: what the dispatcher does; a compiled step's fused C++ kernels are not aten calls), `events_per_step`
    (every profiler event) and the 20 that take the most time."""
    from torch.profiler import profile as prof, ProfilerActivity
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    gen = torch.Generator().manual_seed(2)
    def forever():   # epoch after epoch: a small set has fewer batches than the steps profiled
        while True: yield from path.batches(groups, gen)
    it = forever()
    for _ in range(3): path.step(next(it))
    with prof(activities=acts) as p:
        for _ in range(steps): path.step(next(it))
        sync(device)
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    events = p.key_averages()
    rows = sorted(events, key=lambda e: getattr(e, key, 0), reverse=True)[:20]
    return {"aten_calls_per_step": sum(e.count for e in events if e.key.startswith("aten::")) / steps,
            "events_per_step": sum(e.count for e in events) / steps,
            "top": [{"name": e.key, "calls": e.count, "self_cpu_ms": e.self_cpu_time_total / 1000,
                     "self_device_ms": getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0)) / 1000} for e in rows]}


def run_baseline(rev: str, argv: list[str]) -> dict:
    """This benchmark with `argv` (less --baseline and --out) on the code of git revision `rev`: its own copy of this
    script in a temporary worktree, importing that worktree's `anids`; returns its results JSON with the revision."""
    import tempfile
    from _revisions import worktree
    drop, args = {"--baseline", "--out"}, []
    it = iter(argv)
    for x in it:
        if x in drop: next(it, None)
        elif x.split("=")[0] not in drop: args.append(x)
    with worktree(rev) as (tree, full), tempfile.TemporaryDirectory() as tmp:
        dest = Path(tmp) / "baseline.json"
        env = dict(os.environ, PYTHONPATH=str(tree) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        print(f"baseline: the code at {full[:7]}", flush=True)
        subprocess.run([sys.executable, str(tree / "benchmarks" / Path(__file__).name), *args, "--out", str(dest)],
                       cwd=tree, env=env, check=True)
        res = json.loads(dest.read_text())
    return {"revision": full, "command": " ".join(["python", "benchmarks/bench_fast_step.py", *args]), "runs": res["runs"],
            "environment_before": res.get("environment_before")}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--recipe", default="cpu-30min")
    ap.add_argument("--methods", nargs="+", default=["none", "anids"], help="noise methods (default none anids)")
    ap.add_argument("--molecule", default="ethanol",
                    help="bundled MD17 molecule (default ethanol), 'all': the eight molecules (9-21 atoms) in turn, a "
                         "stand-in for QM9 in `--recipe pretrain` (fixed-shape batches then pad each to 21 atoms), or "
                         "'qm9': QM9's training molecules (3-29 atoms; the shipped pre-training's data, offline from qm9pack)")
    ap.add_argument("--train", type=Path, default=None, help="an extxyz file instead of the bundled molecule")
    ap.add_argument("--n", type=int, default=950, help="training structures (default 950, as the ethanol benchmark)")
    ap.add_argument("--pretrained", default="qm9", help="weights for the methods with noise (default the shipped QM9 ones; '' for none)")
    ap.add_argument("--batch-size", type=int, default=None, help="structures per step (default: the recipe's)")
    ap.add_argument("--train-generator", type=lambda v: {"true": True, "false": False}[v.lower()], default=None,
                    help="true | false: psi trained jointly or frozen, for the learned methods (default: the recipe's)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--epochs", type=int, default=2, help="whole epochs timed per path (default 2)")
    ap.add_argument("--profile", action="store_true", help="also record the top operators of 10 steps of each path")
    ap.add_argument("--fit-epochs", type=int, default=0,
                    help="also time this many epochs of a whole anids.train.fit with and without fast_step (0: skip; the "
                         "structures after the first --n are its validation set)")
    ap.add_argument("--size-buckets", type=int, default=1,
                    help="draw each batch from one of this many groups of structures of similar size, one fixed-shape set and "
                         "step per group (TrainConfig.size_buckets; default 1: one set padded to the largest structure)")
    ap.add_argument("--neighbour-lists", choices=("stored", "streamed"), default="stored",
                    help="periodic cells: lists stored on the device, or each batch's built on the host and loaded (TrainConfig.neighbour_lists)")
    ap.add_argument("--matmul-precision", choices=("highest", "high", "medium"), default="highest",
                    help="float32 matrix products (torch.set_float32_matmul_precision; high: TF32 on GPUs; TrainConfig.matmul_precision)")
    ap.add_argument("--compiled", action="store_true",
                    help="also time the fixed step traced by torch.compile (TrainConfig.compile_step; its first steps compile)")
    ap.add_argument("--check-only", action="store_true",
                    help="only check the fixed step against the eager one (and the captured pass on CUDA); no timings")
    ap.add_argument("--baseline", default=None, metavar="REV",
                    help="also run this benchmark on the code of git revision REV first (a temporary worktree) and write "
                         "each path's ratio to its eager step")
    ap.add_argument("--out", type=Path, default=None, help="results JSON (default results/bench_fast_step_<device>.json)")
    a = ap.parse_args(argv)
    baseline = run_baseline(a.baseline, sys.argv[1:] if argv is None else list(argv)) if a.baseline else None
    torch.set_num_threads(a.threads)
    torch.set_float32_matmul_precision(a.matmul_precision)   # every path, and the checks of fixed against eager
    device = torch.device(a.device)
    if device.type == "cuda" and not torch.cuda.is_available(): raise SystemExit("--device cuda, but torch sees no GPU")
    if a.train: everything = D.load_extxyz(a.train)
    elif a.recipe in PERIODIC_RECIPES:   # made-up crystals of the recipe's kind (bench_recipe_steps), random labels
        everything = structures_for(a.recipe, a.n + 50)[0]
    elif a.molecule == "all":   # the eight bundled molecules interleaved, so that any first n structures mix them
        from anids.data.downloads import MD17_MOLECULES
        sets = [D.load_md17(m) for m in MD17_MOLECULES]
        everything = [s[k] for k in range(min(map(len, sets))) for s in sets]
    elif a.molecule == "qm9":
        from anids.data.pretrain_data import load_qm9
        everything = load_qm9(split="train", max_structures=a.n, progress=False)
    else: everything = D.load_md17(a.molecule)
    frames = everything[:a.n]
    before = environment()
    dest = a.out or Path("results") / f"bench_fast_step_{device.type}.json"
    # the side-by-side ratios first (eager ms per step / fast ms per step, the same run and device): they carry over
    # between machines better than the absolute times
    name = (f"bench_fast_step {a.recipe}" + (f", {a.size_buckets} size buckets" if a.size_buckets > 1 else "")
            + (", streamed lists" if a.neighbour_lists == "streamed" else "") + (", checks" if a.check_only else "")
            + (f", matmul precision {a.matmul_precision}" if a.matmul_precision != "highest" else ""))
    out = {"benchmark": name, "ratios": {}, "recipe": a.recipe, "data": str(a.train or (f"made-up {a.recipe} cells" if a.recipe in PERIODIC_RECIPES else f"bundled {a.molecule}")),
           "n_structures": len(frames), "device": gpu_info(device), "matmul_precision": a.matmul_precision, "runs": {},
           "environment_before": before}
    for method in a.methods:
        cfg = recipe_config(a.recipe, method=method, seed=0, progress=False,
                            **({} if a.train_generator is None or method in ("none", "dens") else {"train_generator": a.train_generator}))
        if a.batch_size: cfg = replace(cfg, batch_size=a.batch_size)
        pre = a.pretrained if (a.pretrained and method != "none" and cfg.scheme != "pretrain") else None
        torch.manual_seed(0)
        module, cfg, train, info = prepare_training(frames, cfg, pre)
        groups = Groups(train, module, cfg, device, a.size_buckets, a.neighbour_lists == "streamed")
        spe, fs = groups.steps_per_epoch, groups.sets[0]
        run = {"method": method, "scheme": cfg.scheme, "pretrained": str(pre), "train_generator": module.noise_cfg.train_generator,
               "batch_size": cfg.batch_size, "steps_per_epoch": spe, "recipe_epochs": cfg.epochs, "size_buckets": a.size_buckets}
        shapes = groups.describe()
        if len(shapes) == 1: run.update({k: v for k, v in shapes[0].items() if k != "structures"})
        else: run["groups"] = shapes
        checks = [check_fixed_against_eager(module, g, s, device) for g, s in zip(groups.indices.groups(), groups.sets)]
        run["check_fixed_vs_eager"] = checks[0]
        if len(checks) > 1: run["check_fixed_vs_eager_groups"] = checks
        kinds = ["eager", "fixed"] + (["captured"] if device.type == "cuda" else []) + (["compiled"] if a.compiled else [])
        if device.type == "cuda":
            run["check_captured"] = [attempt(check_captured, module, fs, device, noise) for noise in (False, True)]
        if a.check_only: kinds = []
        def measure(kind):
            path = Path_(kind, module, cfg, train, groups, device, spe)
            r = median_step_ms(path, groups, device, a.warmup, a.steps)
            r.update(epoch_seconds(path, groups, device, a.epochs))
            r["recipe_minutes"] = r["s_per_epoch"] * cfg.epochs / 60
            r["minutes_per_10k_steps"] = r["ms_per_step"] * 1e4 / 6e4
            if a.profile: r["profile"] = profile(path, groups, device)
            return r
        for kind in kinds:
            run[kind] = r = attempt(measure, kind)
            if "error" in r: continue
            print(f"{method:6s} {kind:9s} {r['ms_per_step']:8.2f} ms/step  {r['s_per_epoch']:7.3f} s/epoch  "
                  f"{cfg.epochs} epochs: {r['recipe_minutes']:6.1f} min"
                  + (f"  {r['profile']['aten_calls_per_step']:.0f} aten calls/step" if "profile" in r else ""), flush=True)
        kinds = [k for k in kinds if "error" not in run[k]]
        for kind in kinds[1:]:
            run[f"speedup_{kind}"] = out["ratios"][f"{method}: eager / {kind} ms per step"] = \
                run["eager"]["ms_per_step"] / run[kind]["ms_per_step"]
            if a.size_buckets > 1:   # steps of the groups differ in cost: the epoch weighs them as a run does
                out["ratios"][f"{method}: eager / {kind} s per epoch"] = run["eager"]["s_per_epoch"] / run[kind]["s_per_epoch"]
        if a.fit_epochs and a.recipe != "pretrain-paper":   # fit_epochs runs a named recipe
            run["fit"] = [attempt(fit_epochs, everything, a.n, a.recipe, method, pre, device, a.fit_epochs, fast) for fast in (False, True)]
            # Lightning's share of a step: a whole fit's epoch against the same path's own loop (optimiser, schedule,
            # EMA, no Lightning), per step
            fast_fit, own = run["fit"][1], run.get("captured", run.get("fixed", {}))
            if "error" not in fast_fit and "s_per_epoch" in own:
                run["lightning_ms_per_step"] = 1000 * (fast_fit["s_per_epoch"] - own["s_per_epoch"]) / spe
            for r in (r for r in run["fit"] if "error" not in r):
                print(f"{method:6s} fit, fast_step={r['fast_step']!s:5s} {r['s_per_epoch']:7.3f} s/epoch  "
                      f"{cfg.epochs} epochs: {r['recipe_minutes']:6.1f} min", flush=True)
        out["runs"][method] = run
        write(out, dest)   # after each method: a run stopped by its time limit keeps what it measured
        print(f"{method}: fixed vs eager: " + ", ".join(f"{k} {v:.1e}" for k, v in run["check_fixed_vs_eager"].items()
                                                      if k.endswith("rel_diff"))
              + "".join(f"; captured vs fixed ({'noise' if c['noise'] else 'no noise'}): loss {c['loss_rel_diff']:.1e}, grad {c['grad_rel_diff']:.1e}"
                        for c in run.get("check_captured", [])), flush=True)
    if baseline is not None:
        out["baseline"] = baseline
        for method in (m for m in a.methods if m in baseline["runs"] and "eager" in baseline["runs"][m]):
            ref = baseline["runs"][method]["eager"]
            for kind in (k for k in ("eager", "fixed", "captured", "compiled") if "ms_per_step" in out["runs"][method].get(k, {})):
                r = out["runs"][method][kind]
                out["ratios"][f"{method}: {kind} / eager at {baseline['revision'][:7]}, ms per step"] = r["ms_per_step"] / ref["ms_per_step"]
                out["ratios"][f"{method}: {kind} / eager at {baseline['revision'][:7]}, s per epoch"] = r["s_per_epoch"] / ref["s_per_epoch"]
                print(f"{method:6s} {kind:9s} over eager at {baseline['revision'][:7]}: "
                      f"{r['ms_per_step'] / ref['ms_per_step']:.2f} per step, {r['s_per_epoch'] / ref['s_per_epoch']:.2f} per epoch")
    out["environment_after"] = after = environment()
    warn = load_warning(before, after)
    if warn: print(warn); out["load_warning"] = warn
    write(out, dest)
    print(f"wrote {dest}")


if __name__ == "__main__":
    main()
