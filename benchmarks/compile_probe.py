"""Can torch.compile take a conservative-force training step on the CPU? A probe for the CPU-step work.

    python benchmarks/compile_probe.py --threads 1 --out results/checks/compile_probe_cpu.json

One supervised step of the `cpu-30min` backbone (PaiNN `demo`) on 8 ethanols (72 atoms, each molecule's complete
graph, EMT labels): energies and forces F = -dE/dx, the loss sum (E - E_ref)^2 + 80 mean (F - F_ref)^2, its gradients
for every weight. Two ways: eager, forces by `torch.autograd.grad(create_graph=True)` as `AniDSModel.predict` computes
them; and compiled, forces by `torch.func.grad` of a `functional_call`, the whole loss inside `torch.compile` (inductor's
C++ backend), because a compiled graph cannot be differentiated twice (aot_autograd refuses double backward). Printed:
ms per step (median of `--steps` after warm-up), operator calls per step of the eager step, and the largest differences
of the loss and the gradients between the two. No noise, no Lightning, no optimiser: the part of a step that is the
backbone's.

`--no-graph-breaks` measures what the compiled step could be: dynamo breaks the graph wherever the code reads a tensor
value on the host, here the backbone's input checks (`Backbone.check_inputs`) and PaiNN's first-message shortcut over
the atoms that carry a vector feature; this option turns both off, in this process only, for both steps. (Running the
steps inside `anids.nn.fixed_shapes.sync_free()`, which defers the checks, fails under `torch.func.grad`: the deferred
checks keep tensors of the transform, "Cannot access storage of TensorWrapper".)
"""
from __future__ import annotations
import argparse, json, statistics, sys, time
from pathlib import Path
import torch


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--no-graph-breaks", action="store_true",
                   help="turn off the input checks and PaiNN's vector-source shortcut in this process (see above)")
    p.add_argument("--out", default=None, help="results JSON (default: print only)")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    from ase.build import molecule
    from ase.calculators.emt import EMT
    from torch.func import functional_call, grad
    from anids.nn.backbones import build
    from anids.nn.graphs import Graph
    from anids.provenance import versions
    if a.no_graph_breaks:
        import anids.nn.backbones as backbones, anids.nn.painn as painn
        backbones.Backbone.check_inputs = lambda self, *args, **kw: None
        painn.is_sync_free = lambda: True   # the shortcut's rows depend on values; run the v_j term on every edge
    torch.manual_seed(0)
    mols = []
    for k in range(8):
        m = molecule("CH3CH2OH"); m.rattle(0.05, seed=k); m.calc = EMT(); mols.append(m)
    pos = torch.tensor([x for m in mols for x in m.positions], dtype=torch.float32)
    z = torch.tensor([n for m in mols for n in m.numbers])
    batch = torch.arange(8).repeat_interleave(9)
    e_ref = torch.tensor([m.get_potential_energy() for m in mols], dtype=torch.float32)
    f_ref = torch.tensor([f for m in mols for f in m.get_forces()], dtype=torch.float32)
    i, j = torch.meshgrid(torch.arange(9), torch.arange(9), indexing="ij")
    keep = i != j
    pairs = torch.stack([j[keep], i[keep]])
    edge_index = torch.cat([pairs + 9 * k for k in range(8)], dim=1)
    graph = Graph(edge_index=edge_index, shift=torch.zeros(edge_index.shape[1], 3))
    net = build("painn", "demo").train()
    params = {k: v for k, v in net.named_parameters()}

    def energies(params, x):
        out = functional_call(net, params, (z, x, graph, batch))
        return torch.zeros(8).index_add(0, batch, out.atomic_energy)

    def eager_loss(params, x):
        x = x.clone().requires_grad_(True)
        e = energies(params, x)
        f = -torch.autograd.grad(e.sum(), x, create_graph=True)[0]
        return ((e - e_ref) ** 2).mean() + 80 * ((f - f_ref) ** 2).mean()

    def functional_loss(params, x):
        e = energies(params, x)
        f = -grad(lambda y: energies(params, y).sum())(x)
        return ((e - e_ref) ** 2).mean() + 80 * ((f - f_ref) ** 2).mean()

    compiled = torch.compile(functional_loss)
    names = list(params)
    def step(fn):
        loss = fn(params, pos)
        g = torch.autograd.grad(loss, [params[k] for k in names], allow_unused=True)   # the force encoding and vector head: unused
        return loss, [torch.zeros_like(params[k]) if x is None else x for k, x in zip(names, g)]
    res = {}
    ref = None
    for name, fn in (("eager", eager_loss), ("compiled", compiled)):
        t0 = time.perf_counter()
        for _ in range(3): loss, g = step(fn)
        warm = time.perf_counter() - t0
        times = []
        for _ in range(a.steps):
            t = time.perf_counter(); loss, g = step(fn); times.append(time.perf_counter() - t)
        res[name] = {"ms_per_step": 1e3 * statistics.median(times), "first_three_steps_s": warm, "loss": float(loss)}
        if ref is None: ref = (loss.detach(), [x.detach() for x in g])
        else:
            res[name]["max_loss_diff"] = float(abs(loss.detach() - ref[0]))
            res[name]["max_grad_rel_diff"] = max(float((x - r).abs().max() / r.abs().max().clamp_min(1e-30))
                                                 for x, r in zip(g, ref[1]))
        print(f"{name:9s} {res[name]['ms_per_step']:.2f} ms per step (first three {warm:.1f} s)", flush=True)
    from torch.utils._python_dispatch import TorchDispatchMode
    class Count(TorchDispatchMode):
        n = 0
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.n += 1; return func(*args, **(kwargs or {}))
    with Count() as c: step(eager_loss)
    res["eager"]["operator_calls"] = c.n
    res["speedup"] = res["eager"]["ms_per_step"] / res["compiled"]["ms_per_step"]
    print(f"speed-up {res['speedup']:.2f}x; eager operator calls per step {c.n}; compiled vs eager: loss "
          f"{res['compiled']['max_loss_diff']:.2e}, gradients (max relative) {res['compiled']['max_grad_rel_diff']:.2e}")
    if a.out:
        out = {"description": __doc__.strip().splitlines()[0], "threads": a.threads, "steps": a.steps, "no_graph_breaks": a.no_graph_breaks, "results": res,
               "versions": versions("torch")}
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
