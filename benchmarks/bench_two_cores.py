"""What a second CPU core gives the compiled Algorithm 1 step: as a second thread, or as a second process training on
half of each batch (data parallel, the gradients averaged by a gloo all-reduce before each optimiser step).

    python benchmarks/bench_two_cores.py --out results/bench_two_cores_pretrain_qm9_cpu.json

Every layout trains AniDS with `FastStep(compiled=True)` on the first `--n` QM9 training molecules in `--size-buckets`
size groups, `--batch-size` structures a step in all, each in fresh processes: one untimed epoch (every group's step
compiled), then one timed, its seconds per structure trained and its median milliseconds per step. The layouts:

* `1 process x 1 thread`, the whole batch; `1 process x 2 threads`, the whole batch;
* `1 process x 1 thread, half batch`: one core alone on what each process of the next layout trains;
* `2 processes x 1 thread`: each half of every batch (the batches of one epoch shared out, every other one), the
  gradients averaged across them, so both hold the same weights (checked: their parameter sums are printed).

`2 processes x 1 thread` against `1 process x 1 thread, half batch` shows how much two copies of the step slow each
other down when they run side by side (a resource the cores share: memory bandwidth, the L3 cache)."""
from __future__ import annotations
import argparse, json, os, socket, statistics, sys, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
LAYOUTS = {"1 process x 1 thread": (1, 1, 1), "1 process x 2 threads": (1, 2, 1),
           "1 process x 1 thread, half batch": (1, 1, 2), "2 processes x 1 thread": (2, 1, 2)}   # (processes, threads, batch divisor)


def _rank(rank: int, world: int, threads: int, per_rank: int, buckets: int, n: int, port: int, queue) -> None:
    "One process of a layout: its share of each epoch's batches, gradients averaged over the `world` processes."
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch, torch.distributed as dist
    from dataclasses import replace
    from bench_fast_step import Groups, Path_, recipe_config
    from anids.train import prepare_training
    from anids.data.pretrain_data import load_qm9
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    mols = load_qm9(split="train", max_structures=n, progress=False)
    cfg = replace(recipe_config("pretrain", method="anids", seed=0, progress=False), batch_size=per_rank)
    torch.manual_seed(0)
    module, cfg, train, _ = prepare_training(mols, cfg, None)
    groups = Groups(train, module, cfg, torch.device("cpu"), buckets)
    path = Path_("compiled", module, cfg, train, groups, torch.device("cpu"), groups.steps_per_epoch)
    for p in path.params: dist.broadcast(p.data, 0)
    flat = torch.zeros(sum(p.numel() for p in path.params))

    def average_gradients(params):   # the whole batch's: the mean of the processes' (each a mean over its half)
        off = 0
        for p in params:
            if p.grad is None: p.grad = torch.zeros_like(p)   # a weight this half did not reach
            flat[off:off + p.numel()].copy_(p.grad.reshape(-1)); off += p.numel()
        dist.all_reduce(flat)
        flat.div_(world)
        off = 0
        for p in params:
            p.grad.copy_(flat[off:off + p.numel()].view_as(p)); off += p.numel()
    if world > 1: path.gradient_hook = average_gradients
    step = path.step

    gen = torch.Generator().manual_seed(0)
    def my_batches():
        torch.manual_seed(1000 + path.n)   # every process draws the same epoch, and takes every world-th batch of it
        batches = list(path.batches(groups, gen))
        return batches[rank::world][:len(batches) // world]

    for b in my_batches(): step(b)
    dist.barrier()
    mine, times = my_batches(), []
    t0 = time.perf_counter()
    for b in mine:
        t = time.perf_counter()
        step(b)
        times.append(time.perf_counter() - t)
    dist.barrier()
    epoch_s = time.perf_counter() - t0
    total = torch.tensor([sum(float(p.detach().double().sum()) for p in path.params)], dtype=torch.float64)
    sums = [torch.zeros(1, dtype=torch.float64) for _ in range(world)]
    dist.all_gather(sums, total)
    if rank == 0:
        queue.put({"s_per_epoch": epoch_s, "steps_per_epoch": len(mine), "structures_per_step": per_rank * world,
                   "ms_per_structure": 1000 * epoch_s / (len(mine) * per_rank * world),
                   "ms_per_step": 1000 * statistics.median(times), "parameter_sums": [float(s) for s in sums]})
    dist.destroy_process_group()


def run_layout(name: str, a) -> dict:
    import torch.multiprocessing as mp
    world, threads, divisor = LAYOUTS[name]
    if a.batch_size % divisor: raise SystemExit(f"--batch-size {a.batch_size} does not halve")
    with socket.socket() as s:   # a free port for the processes' rendezvous
        s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    mp.start_processes(_rank, args=(world, threads, a.batch_size // divisor, a.size_buckets, a.n, port, queue),
                       nprocs=world, join=True, start_method="spawn")
    out = queue.get()
    if len(set(out["parameter_sums"])) != 1: raise SystemExit(f"{name}: the processes' weights differ: {out['parameter_sums']}")
    return {"processes": world, "threads_per_process": threads, "structures_per_process_step": a.batch_size // divisor, **out}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=3200, help="QM9 training molecules (default 3200)")
    ap.add_argument("--size-buckets", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=64, help="structures a step, over all processes (default 64)")
    ap.add_argument("--layouts", nargs="+", default=list(LAYOUTS), choices=list(LAYOUTS), metavar="LAYOUT")
    ap.add_argument("--out", type=Path, default=Path("results/bench_two_cores_pretrain_qm9_cpu.json"))
    a = ap.parse_args(argv)
    from _env import environment, load_warning
    before = environment()
    layouts = {}
    for name in a.layouts:
        layouts[name] = r = run_layout(name, a)
        print(f"{name}: {r['ms_per_structure']:.2f} ms per structure trained, {r['ms_per_step']:.1f} ms per step of "
              f"{r['structures_per_process_step']} a process ({r['steps_per_epoch']} steps, {r['s_per_epoch']:.2f} s)", flush=True)
    out = {"benchmark": f"bench_two_cores pretrain, the first {a.n} QM9 molecules in {a.size_buckets} size groups",
           "method": "anids", "batch_size": a.batch_size, "size_buckets": a.size_buckets, "n": a.n, "layouts": layouts,
           "ratios": {}, "environment_before": before}
    one = layouts.get("1 process x 1 thread")
    for name, r in layouts.items():
        if one is not None and name != "1 process x 1 thread":
            out["ratios"][f"{name} / 1 process x 1 thread, ms per structure trained"] = r["ms_per_structure"] / one["ms_per_structure"]
    if {"2 processes x 1 thread", "1 process x 1 thread, half batch"} <= set(layouts):
        out["ratios"]["each of 2 processes side by side / 1 alone, ms per step"] = (
            layouts["2 processes x 1 thread"]["ms_per_step"] / layouts["1 process x 1 thread, half batch"]["ms_per_step"])
    out["environment_after"] = after = environment()
    warn = load_warning(before, after)
    if warn: print(warn); out["load_warning"] = warn
    for k, v in out["ratios"].items(): print(f"{k}: {v:.2f}")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
