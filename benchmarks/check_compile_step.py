"""Is the compiled step (`FastStep(compiled=True)`, `TrainConfig.compile_step`) right for every backbone and noise method?

    python benchmarks/check_compile_step.py                       # every backbone x every noise method, tiny presets
    python benchmarks/check_compile_step.py --backbones painn --methods none anids

For each pair: two copies of one model (the backbone's `tiny` preset, psi trained jointly where it is learned) make
three `FastStep` passes (loss and gradients, no optimiser step: the same weights each time) over batches of the same
four ethanols with the same random draws (inductor's `fallback_random`), one eager, one traced by torch.compile; the
losses of every pass and the last pass's gradients of every parameter must agree to float32 rounding (the
tolerances the notebook test of anids.train.fast uses: 1e-5 relative on the losses, 1e-4 of the largest gradient
entry per parameter). Also recorded: the seconds to compile and take the compared steps. Step times are
benchmarks/bench_compile_step.py's job (this check may run niced beside other work). The notebook test checks PaiNN
with AniDS only, at test time; this is the rest, too slow for the suite (one compilation per pair). Writes
results/checks/compile_step_backbones_cpu.json; exits non-zero when a pair disagrees or fails."""
import argparse, json, sys, time, traceback
from pathlib import Path

import torch
import torch._inductor.config as inductor_config
from ase.build import molecule
from torch_geometric.data import Data

from anids.method.losses import LossWeights
from anids.method.model import DenoisingConfig, build_model
from anids.method.noise import LEARNED_METHODS, NOISE_METHODS
from anids.nn.backbones import BACKBONES
from anids.train.fast import FastStep, FixedShapeSet

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import environment   # noqa: E402


def ethanols(k: int, seed: int = 1) -> list[Data]:
    "k conformations of ethanol with made-up labels (only shapes and identities matter for the comparison)."
    g, eth = torch.Generator().manual_seed(seed), molecule("CH3CH2OH")
    base = torch.tensor(eth.positions, dtype=torch.float32)
    return [Data(z=torch.tensor(eth.numbers), pos=base + 0.1 * torch.randn(9, 3, generator=g),
                 forces=torch.randn(9, 3, generator=g), energy=torch.randn(1, generator=g)) for _ in range(k)]


def run_steps(backbone: str, method: str, compiled: bool, start_state: dict, items, steps: int) -> dict:
    model = build_model(backbone, "tiny", method, generator_preset="tiny")
    model.load_state_dict(start_state)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    cfg = DenoisingConfig(p=1.0, r=0.5, train_generator=method in LEARNED_METHODS)
    t0 = time.perf_counter()
    step = FastStep(model, FixedShapeSet(items), 2, cfg, LossWeights(), params, compiled=compiled)
    torch.manual_seed(5)
    with inductor_config.patch(fallback_random=True):
        losses = []
        for k in range(steps):
            for p in params: p.grad = None
            losses.append(float(step(torch.tensor([k % 4, (k + 1) % 4]))[0]))
    grads = [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in params]
    return {"losses": losses, "grads": grads, "seconds": time.perf_counter() - t0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backbones", nargs="+", default=list(BACKBONES))
    ap.add_argument("--methods", nargs="+", default=list(NOISE_METHODS))
    ap.add_argument("--steps", type=int, default=3, help="steps compared (default 3)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("results/checks/compile_step_backbones_cpu.json"))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    items, rows, bad = ethanols(4), [], []
    for backbone in a.backbones:
        for method in a.methods:
            row = {"backbone": backbone, "method": method}
            try:
                start = build_model(backbone, "tiny", method, generator_preset="tiny", seed=3).state_dict()
                eager = run_steps(backbone, method, False, start, items, a.steps)
                comp = run_steps(backbone, method, True, start, items, a.steps)
                loss_rel = max(abs(x - y) / max(abs(x), 1e-30) for x, y in zip(eager["losses"], comp["losses"]))
                grad_rel = max(float((c - e).abs().max() / e.abs().max().clamp_min(1e-30)) for c, e in zip(comp["grads"], eager["grads"]))
                ok = loss_rel < 1e-5 and grad_rel < 1e-4
                row.update(ok=ok, loss_rel_max=loss_rel, grad_rel_max=grad_rel, losses_eager=eager["losses"],
                           losses_compiled=comp["losses"], compile_and_steps_s=comp["seconds"])
            except Exception as e:   # a pair that fails is a finding: recorded, then the exit status says so
                row.update(ok=False, error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc(limit=3))
            if not row["ok"]: bad.append(f"{backbone}/{method}")
            rows.append(row)
            print(f"{backbone:14s} {method:10s} " + (f"loss rel {row['loss_rel_max']:.1e}  grad rel {row['grad_rel_max']:.1e}  "
                  f"(compiled in {row['compile_and_steps_s']:.0f} s)" if "loss_rel_max" in row else row["error"][:200]), flush=True)
            a.out.parent.mkdir(parents=True, exist_ok=True)
            a.out.write_text(json.dumps({"description": __doc__.split("\n\n")[2].replace("\n", " "), "threads": a.threads,
                                         "rows": rows, "failed": bad, "environment": environment()}, indent=1))
    print(f"wrote {a.out}; " + (f"disagree or fail: {', '.join(bad)}" if bad else "every pair agrees"))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
