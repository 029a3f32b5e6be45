"""Could torch.compile take the whole fixed-shape training step on the CPU? A probe for the CPU-step work.

    python benchmarks/compile_step_probe.py --threads 1 --out results/checks/compile_step_probe_cpu.json
    python benchmarks/compile_step_probe.py --methods none anids --threads 2 --out results/checks/compile_step_probe_cpu_2threads.json

The `cpu-30min` step (PaiNN `demo`, batches of 8 ethanols, psi frozen with its covariances cached for AniDS) on the
fixed shapes of `anids.train.fast.FixedShapeSet` (a complete graph per molecule, the structures kept stacked), inside
`sync_free()`: `AniDSModel.losses` (corruption, the denoiser's energy, forces and noise output, every loss term), then
the backward pass over the trained weights. No optimiser, no weight average, no Lightning (together under a millisecond
of a 23 ms step, measured). Three ways, one after the other on the same batches:

- `eager`: the step as `FastStep` runs it on a CPU, conservative forces by `torch.autograd.grad(create_graph=True)`;
- `functional`: the same, with the forces by `torch.func.grad` of the energy (with the energies and the vector output
  as its auxiliary outputs), because a compiled graph cannot be differentiated twice (aot_autograd refuses double
  backward) while a `torch.func` transform inside it is traced into one forward graph whose backward is first-order;
- `compiled`: `functional` inside `torch.compile` (inductor's C++ backend), once with inductor's own random numbers
  (the speed a run would see) and once with `fallback_random` (torch's generator, so that its losses and gradients can
  be compared with the eager step's on the same draws).

What this probe changes in its own process only (what a real compiled step would have to solve): `AniDSModel.predict`
is replaced by a functional one without stress (these molecules have none); the package's value checks (`check_that`,
`Backbone.check_inputs`) are turned off for the compiled runs, because a check deferred inside a `torch.func`
transform keeps a tensor of the transform, which inductor cannot compile ("Cannot access storage of TensorWrapper").
Printed and written: ms per step (median of `--steps` after `--warmup`), the first steps' seconds (compilation), and
the largest differences of the loss and the gradients against the eager step.
"""
from __future__ import annotations
import argparse, json, os, statistics, sys, time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # as bench_overhead.py: spinning threads slow a shared 2-core CPU
import torch, torch._dynamo   # noqa: E402


def functional_predict(self, data, pos=None, force_encoding=None, compute_forces=True, compute_stress=False,
                       create_graph=False, vector_atoms=None, graph=None, allow_untrained=False):
    "AniDSModel.predict for molecules on a fixed graph, forces by torch.func.grad (this probe only; no stress)."
    from torch_geometric.utils import scatter
    from anids.method.model import Prediction
    if compute_stress: raise ValueError("this probe's predict has no stress")
    z, batch, B = data.z, data.batch, int(data.num_graphs)
    pos = data.pos if pos is None else pos
    real = getattr(data, "atom_mask", None)

    def energy_of(p):
        out = self.denoiser(z, p, graph, batch, force_encoding, vector_atoms)
        e_atom = (self.energy_scale * out.atomic_energy).to(torch.float64) + self.atomic_energies[z]
        if real is not None: e_atom = torch.where(real, e_atom, 0.0)
        energy = scatter(e_atom, batch, 0, dim_size=B)
        return energy.sum(), (energy, out.vector)
    if not compute_forces:
        _, (energy, vector) = energy_of(pos)
        return Prediction(energy, None, vector, None)
    g, (energy, vector) = torch.func.grad(energy_of, has_aux=True)(pos)
    return Prediction(energy, -g.to(pos.dtype), vector, None)


def checks_off():
    "Turn the package's value checks off in this process (see the module docstring)."
    import importlib
    noop = lambda *a, **k: None
    for name in ("anids.nn.fixed_shapes", "anids.nn.backbones", "anids.nn.painn", "anids.method.noise",
                 "anids.method.model", "anids.method.views", "anids.method.losses"):
        mod = importlib.import_module(name)
        if hasattr(mod, "check_that"): mod.check_that = noop
    importlib.import_module("anids.nn.backbones").Backbone.check_inputs = noop


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--train", default="data/ethanol_rmd17_pbe/train.xyz", help="ethanol structures (extxyz with labels)")
    p.add_argument("--n", type=int, default=200, help="structures of the set the batches are drawn from")
    p.add_argument("--methods", nargs="+", default=["none", "anids"])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--out", default=None, help="results JSON (default: print only)")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    import torch._inductor.config as inductor_config
    import anids.method.model as M
    from anids.data import read_structures
    from anids.train import make_config, prepare_training
    from anids.train.fast import FixedShapeSet
    from anids.nn.fixed_shapes import sync_free, DeferredChecks
    from anids.provenance import versions
    frames = read_structures(a.train)[:a.n]
    eager_predict, res = M.AniDSModel.predict, {}
    for method in a.methods:
        M.AniDSModel.predict = eager_predict
        cfg = make_config("cpu-30min", method=method, epochs=1, threads=a.threads, progress=False, seed=0)
        torch.manual_seed(0)
        module, cfg, ts, _ = prepare_training(frames, cfg, None if method == "none" else "qm9")
        module.configure_optimizers()
        model, params, data = module.model, module.trained_parameters, None
        data = FixedShapeSet.for_model(ts, model)
        losses = lambda batch: model.losses(batch, module.noise_cfg, module.base_weights, graph=batch.graph)

        def run(fn):
            g, times, first = torch.Generator().manual_seed(0), [], None
            torch.manual_seed(1)   # the same corruption draws for every way (eager, functional, fallback_random)
            t_start = time.perf_counter()
            for k in range(a.steps + a.warmup):
                batch = data.batch(torch.randperm(len(data), generator=g)[:cfg.batch_size])
                t = time.perf_counter()
                for q in params: q.grad = None
                with sync_free(DeferredChecks()):
                    total, _ = fn(batch)
                total.backward(inputs=params)
                if k == a.warmup - 1: first = time.perf_counter() - t_start
                if k >= a.warmup: times.append(time.perf_counter() - t)
            return {"ms_per_step": 1e3 * statistics.median(times), "first_steps_s": first, "loss": float(total.detach())}, \
                   (total.detach(), [torch.zeros_like(q) if q.grad is None else q.grad.clone() for q in params])

        out, ref = {}, None
        def compare(entry, got):
            entry["max_loss_diff"] = float(abs(got[0] - ref[0]))
            entry["max_grad_rel_diff"] = max(float((x - r).abs().max() / r.abs().max().clamp_min(1e-30)) for x, r in zip(got[1], ref[1]))
        out["eager"], ref = run(losses)
        M.AniDSModel.predict = functional_predict
        out["functional"], got = run(losses); compare(out["functional"], got)
        checks_off()
        for fallback in (True, False):
            torch._dynamo.reset()
            inductor_config.fallback_random = fallback
            key = "compiled_fallback_random" if fallback else "compiled"
            out[key], got = run(torch.compile(losses, dynamic=False))
            if fallback: compare(out[key], got)
        out["speedup"] = out["eager"]["ms_per_step"] / out["compiled"]["ms_per_step"]
        res[method] = out
        print(f"{method}: " + ", ".join(f"{k} {v['ms_per_step']:.2f} ms" for k, v in out.items() if isinstance(v, dict))
              + f"; speed-up {out['speedup']:.2f}x; compiled (torch's draws) vs eager: loss "
              f"{out['compiled_fallback_random']['max_loss_diff']:.2e}, gradients {out['compiled_fallback_random']['max_grad_rel_diff']:.2e}",
              flush=True)
    if a.out:
        doc = {"description": __doc__.strip().splitlines()[0], "threads": a.threads, "steps": a.steps, "warmup": a.warmup,
               "batch_size": 8, "n_structures": a.n, "train": a.train, "results": res, "versions": versions("torch")}
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
