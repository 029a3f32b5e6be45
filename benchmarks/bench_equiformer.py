"""Speed benchmark of the Equiformer backbone (anids.nn.equiformer) in a conservative-force training step.

One step = forward (radius graph, energies, forces = -dE/dx with create_graph=True) + backward of
L = MAE(E) + 80 * L2MAE(F) (the MD17 weights), float32, torch.set_num_threads(2), on a batch of 8 aspirin
molecules (21 atoms each: RDKit, SMILES CC(=O)Oc1ccccc1C(=O)O, AddHs, EmbedMolecule(randomSeed=0), 8 rattled copies),
cutoff 5 A, preset `md17` (Equiformer V1, L_max = 2, 128x0e+64x1e+32x2e, 6 blocks, DeNS heads).

Reference measured earlier on this kind of machine: the authors' code takes 5.7 s per step (2.0 s forward, 3.7 s backward) for this model on a
2-core machine; the target is <= 0.8 x 5.7 s. With `--reference-nets DIR` (DIR = the `nets` folder of a checkout of
atomicarchitects/equiformer) the authors' `Equiformer_MD17_DeNS` is timed in the same run, interleaved with ours, on
the same batch and loss, so the ratio is measured rather than quoted.

OpenMP: on a shared, oversubscribed 2-core machine the default spin-waiting of OpenMP threads makes every parallel
op wait for a descheduled partner thread (10-100x slower elementwise ops). We therefore set OMP_WAIT_POLICY=PASSIVE
(before torch is imported) unless told otherwise (--omp-wait-policy default); it applies to both implementations.

    python benchmarks/bench_equiformer.py [--rounds 3] [--steps 5] [--reference-nets /path/to/equiformer/nets]
Writes results/bench_equiformer.json (times in ms).
"""
from __future__ import annotations
import argparse, json, os, statistics, sys, time
from pathlib import Path

REFERENCE_S = dict(total=5.7, forward=2.0, backward=3.7)   # the authors' code, measured on a 2-core machine
ROOT = Path(__file__).resolve().parents[1]


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--preset", default="md17")
    ap.add_argument("--rounds", type=int, default=3, help="independent rounds (median each; best median reported)")
    ap.add_argument("--steps", type=int, default=5, help="timed steps per round (after warm-up)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--omp-wait-policy", default="PASSIVE", help="PASSIVE, ACTIVE, or 'default' (leave unset)")
    ap.add_argument("--reference-nets", default=None, help="the `nets` folder of atomicarchitects/equiformer, to time it too")
    ap.add_argument("--reference-steps", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="print a torch.profiler table of one step of ours")
    ap.add_argument("--out", default=str(ROOT / "results" / "bench_equiformer.json"))
    return ap.parse_args()


args = parse()
if args.omp_wait_policy != "default":
    os.environ["OMP_WAIT_POLICY"] = args.omp_wait_policy
import torch                            # noqa: E402  (after the OpenMP setting)
from torch_geometric.utils import scatter             # noqa: E402
from anids.nn.backbones import build, count_parameters   # noqa: E402
from anids.nn.graphs import radius_graph   # noqa: E402
from molecule_batch import molecule_batch   # noqa: E402  (benchmarks/molecule_batch.py)
from _env import environment, load_warning   # noqa: E402  (benchmarks/_env.py)

torch.set_num_threads(args.threads)
CUTOFF, B = 5.0, 8


def loss_fn(energy, forces, e_ref, f_ref):
    return (energy - e_ref).abs().mean() + 80.0 * torch.sqrt(((forces - f_ref) ** 2).sum(-1) + 1e-12).mean()


def our_step(model, z, pos0, batch, e_ref, f_ref):
    t0 = time.perf_counter()
    pos = pos0.clone().requires_grad_(True)
    graph = radius_graph(pos, model.cutoff, batch, max_neighbors=model.max_neighbors)
    out = model(z, pos, graph, batch)
    energy = scatter(out.atomic_energy, batch, 0, dim_size=B)
    forces = -torch.autograd.grad(energy.sum(), pos, create_graph=True)[0]
    t1 = time.perf_counter()
    loss_fn(energy, forces, e_ref, f_ref).backward()
    t2 = time.perf_counter()
    model.zero_grad(set_to_none=True)
    return t1 - t0, t2 - t1, graph.num_edges


def reference_model(nets_dir: str):
    "The authors' Equiformer_MD17_DeNS (their MD17 L=2 config), with small shims for torch_cluster / torch_scatter."
    import types, importlib
    tc = types.ModuleType("torch_cluster")
    def radius_graph_ref(pos, r, batch=None, max_num_neighbors=1000, loop=False, flow="source_to_target"):
        if batch is None: batch = torch.zeros(pos.shape[0], dtype=torch.long)
        d = torch.cdist(pos.detach(), pos.detach())
        m = (d < r) & (batch[:, None] == batch[None, :])
        m.fill_diagonal_(False)
        dst, src = m.nonzero().t()
        return torch.stack([src, dst])
    tc.radius_graph = radius_graph_ref
    ts = types.ModuleType("torch_scatter")
    from torch_geometric.utils import scatter as pyg_scatter
    ts.scatter = lambda src, index, dim=0, out=None, dim_size=None, reduce="sum": pyg_scatter(src, index, dim=dim, dim_size=dim_size, reduce=reduce)
    sys.modules.setdefault("torch_cluster", tc); sys.modules.setdefault("torch_scatter", ts)
    for name in ["ocpmodels", "ocpmodels.models", "ocpmodels.models.gemnet", "ocpmodels.models.gemnet.layers",
                 "ocpmodels.models.gemnet.layers.radial_basis"]:
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["ocpmodels.models.gemnet.layers.radial_basis"].RadialBasis = type("RadialBasis", (), {})
    pkg = types.ModuleType("nets"); pkg.__path__ = [str(Path(nets_dir).resolve())]   # skip nets/__init__ (OC20 imports)
    sys.modules["nets"] = pkg
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mod = importlib.import_module("nets.equiformer_md17_dens")
    return mod.Equiformer_MD17_DeNS(
        irreps_in="64x0e", irreps_equivariant_inputs="1x0e+1x1e+1x2e", irreps_node_embedding="128x0e+64x1e+32x2e",
        num_layers=6, irreps_node_attr="1x0e", irreps_sh="1x0e+1x1e+1x2e", max_radius=5.0, number_of_basis=32,
        basis_type="exp", fc_neurons=[64, 64], irreps_feature="512x0e+256x1e+128x2e", irreps_head="32x0e+16x1e+8x2e",
        num_heads=4, irreps_pre_attn="128x0e+64x1e+32x2e", rescale_degree=False, nonlinear_message=True,
        irreps_mlp_mid="384x0e+192x1e+96x2e", norm_layer="layer", alpha_drop=0.0, proj_drop=0.0, out_drop=0.0,
        drop_path_rate=0.0, use_force_encoding=True)


def reference_step(model, z, pos0, batch, e_ref, f_ref):
    class Data: pass
    d = Data(); d.z, d.pos, d.batch = z, pos0.clone(), batch
    t0 = time.perf_counter()
    energy, forces = model(d)             # their forward takes -dE/dx with create_graph=True inside
    t1 = time.perf_counter()
    loss_fn(energy.reshape(-1), forces, e_ref, f_ref).backward()
    t2 = time.perf_counter()
    model.zero_grad(set_to_none=True)
    return t1 - t0, t2 - t1


def summarise(times):
    fw, bw = [t[0] for t in times], [t[1] for t in times]
    return dict(forward_ms=1e3 * statistics.median(fw), backward_ms=1e3 * statistics.median(bw),
                total_ms=1e3 * statistics.median([a + b for a, b in zip(fw, bw)]), steps=len(times))


def main():
    torch.manual_seed(0)
    z, pos, batch = molecule_batch(copies=B)
    e_ref, f_ref = torch.randn(B), torch.randn(len(z), 3)
    model = build("equiformer", args.preset)
    ref = reference_model(args.reference_nets) if args.reference_nets else None
    print(f"Equiformer preset {args.preset!r}: {count_parameters(model):,d} parameters; {len(z)} atoms in {B} aspirins; "
          f"threads {torch.get_num_threads()}; OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}"
          + (f"; reference: {count_parameters(ref):,d} parameters" if ref is not None else ""), flush=True)
    env_before = environment()
    ours, theirs, n_edges = [], [], None
    for r in range(args.rounds):
        times = []
        for k in range(args.warmup + args.steps):
            a, b, n_edges = our_step(model, z, pos, batch, e_ref, f_ref)
            if k >= args.warmup: times.append((a, b))
        ours.append(summarise(times))
        s = ours[-1]
        print(f"round {r}: ours  {s['total_ms']:8.0f} ms/step (forward+forces {s['forward_ms']:6.0f}, backward {s['backward_ms']:6.0f})", flush=True)
        if ref is not None:
            times = []
            for k in range(1 + args.reference_steps):
                a, b = reference_step(ref, z, pos, batch, e_ref, f_ref)
                if k >= 1: times.append((a, b))
            theirs.append(summarise(times))
            s = theirs[-1]
            print(f"round {r}: authors' {s['total_ms']:6.0f} ms/step (forward+forces {s['forward_ms']:6.0f}, backward {s['backward_ms']:6.0f})", flush=True)
    best = min(ours, key=lambda s: s["total_ms"])
    med = statistics.median([s["total_ms"] for s in ours])
    print(f"\nours: best round median {best['total_ms']:.0f} ms/step (forward {best['forward_ms']:.0f}, backward {best['backward_ms']:.0f}); "
          f"median over rounds {med:.0f} ms; ratio to the authors' 5.7 s: {best['total_ms'] / 1e3 / REFERENCE_S['total']:.2f} "
          f"(target <= 0.80)")
    env_after = environment()
    result = dict(
        ratio_side_by_side=None,   # ours / the authors' code in the same run (with --reference-nets), the number to read
        benchmark="Equiformer training step (energy + force loss, forces = -dE/dx with create_graph=True)",
        units="ms per step", preset=args.preset, parameters=count_parameters(model), atoms=len(z), structures=B,
        edges=n_edges, cutoff_A=CUTOFF, dtype="float32", threads=torch.get_num_threads(),
        omp_wait_policy=os.environ.get("OMP_WAIT_POLICY"), warmup=args.warmup, steps_per_round=args.steps,
        rounds=ours, best=best, median_over_rounds_ms=med,
        reference_s=REFERENCE_S, ratio_best_to_reference=best["total_ms"] / 1e3 / REFERENCE_S["total"],
        ratio_median_to_reference=med / 1e3 / REFERENCE_S["total"],
        environment_before=env_before, environment_after=env_after,
    )
    if theirs:
        best_ref = min(theirs, key=lambda s: s["total_ms"])
        med_ref = statistics.median([s["total_ms"] for s in theirs])
        result["authors_code"] = dict(rounds=theirs, best=best_ref, median_over_rounds_ms=med_ref,
                                      source=str(args.reference_nets), note="Equiformer_MD17_DeNS, their MD17 L=2 config, "
                                      "torch_cluster/torch_scatter replaced by small equivalent shims")
        result["ratio_best_to_authors_best"] = best["total_ms"] / best_ref["total_ms"]
        result["ratio_side_by_side"] = statistics.median(a["total_ms"] / b["total_ms"] for a, b in zip(ours, theirs))
        result["ratio_per_round_to_authors"] = [a["total_ms"] / b["total_ms"] for a, b in zip(ours, theirs)]
        print(f"authors' code: best round median {best_ref['total_ms']:.0f} ms/step; ratio ours/authors (best/best) "
              f"{result['ratio_best_to_authors_best']:.2f}, per round {[round(x, 2) for x in result['ratio_per_round_to_authors']]}")
    if (w := load_warning(env_before, env_after)): print(w)
    if args.profile:
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            our_step(model, z, pos, batch, e_ref, f_ref)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20))
    out = Path(args.out); out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print("wrote", out)


if __name__ == "__main__":
    main()
