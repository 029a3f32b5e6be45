"""Epoch time of AniDS fine-tuning relative to training without noise, side by side in one process.

    python benchmarks/bench_overhead.py                     # bundled ethanol (offline), PaiNN demo, 2 threads
    python benchmarks/bench_overhead.py --train my.xyz --threads 1

Three runs on the same structures, backbone and recipe (md17-demo): no noise; AniDS with psi frozen (the shipped QM9
pre-trained generator; its Sigma_i cached once before training, reported separately); AniDS with psi trained jointly
(Algorithm 2 from scratch). Each run's seconds per epoch are the median over its epochs after the first. The three
runs alternate `--rounds` times, so a change of the machine's load hits all three alike; the ratios are the medians
of the per-round ratios. Writes results/bench_overhead.json: the ratios first, then the runs, and the machine, load,
threads and package versions before and after (benchmarks/_env.py)."""
import argparse, json, os, statistics, sys, tempfile, time
from pathlib import Path

# OpenMP's wait policy is read when torch loads: PASSIVE unless the environment says otherwise (spinning threads on a
# shared 2-core machine make every parallel op wait; see bench_equiformer_v2.py)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
import torch   # noqa: E402
from lightning.pytorch.callbacks import Callback

from anids import data as D
from anids.train import make_config, fit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _env import environment, load_warning   # noqa: E402


class EpochTimer(Callback):
    def __init__(self): self.times, self._t = [], None
    def on_train_epoch_start(self, trainer, module): self._t = time.perf_counter()
    def on_train_epoch_end(self, trainer, module): self.times.append(time.perf_counter() - self._t)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train", help="extxyz with energies and forces (default: bundled ethanol)")
    p.add_argument("--n", type=int, default=400, help="training structures (default 400)")
    p.add_argument("--epochs", type=int, default=4, help="epochs per run; the first is not timed (default 4)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=3, help="the three runs alternate this many times (default 3)")
    p.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "results" / "bench_overhead.json"))
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    frames = D.read_structures(a.train) if a.train else D.load_md17("ethanol")
    train, val = frames[:a.n], frames[a.n:a.n + 20]
    runs = {"none": dict(method="none", pretrained=None), "anids_frozen_cached": dict(method="anids", pretrained="qm9"),
            "anids_joint": dict(method="anids", pretrained=None)}
    env_before = environment()
    res = {name: {"seconds_per_epoch_by_round": [], "epoch_times_s": []} for name in runs}
    per_round = []
    for rnd in range(a.rounds):   # the three runs alternate, so a change of load hits all of them alike
        for name, r in runs.items():
            timer = EpochTimer()
            cfg = make_config("md17-demo", method=r["method"], epochs=a.epochs, threads=a.threads, progress=False,
                              check_val_every_n_epoch=a.epochs, seed=rnd)
            with tempfile.TemporaryDirectory() as d:
                m = fit(train, val, cfg, d, pretrained=r["pretrained"], callbacks=[timer])
            res[name]["seconds_per_epoch_by_round"].append(statistics.median(timer.times[1:]))
            res[name]["epoch_times_s"].append(timer.times)
            res[name].update(train_generator=m["config"]["train_generator"], covariance_cache_s=m["extra"].get("covariance_cache_s"))
            print(f"round {rnd + 1}/{a.rounds} {name:22s} {res[name]['seconds_per_epoch_by_round'][-1]:.3f} s/epoch  "
                  f"(epochs {', '.join(f'{t:.2f}' for t in timer.times)})", flush=True)
        base = res["none"]["seconds_per_epoch_by_round"][-1]
        per_round.append({"frozen_cached_over_none": res["anids_frozen_cached"]["seconds_per_epoch_by_round"][-1] / base,
                          "joint_over_none": res["anids_joint"]["seconds_per_epoch_by_round"][-1] / base})
    for name in res: res[name]["seconds_per_epoch"] = statistics.median(res[name]["seconds_per_epoch_by_round"])
    ratios = {k: statistics.median([r[k] for r in per_round]) for k in per_round[0]}
    print(f"ratios (median over {a.rounds} rounds): frozen (cached) / none = {ratios['frozen_cached_over_none']:.3f}; "
          f"joint / none = {ratios['joint_over_none']:.3f}")
    env_after = environment()
    if (w := load_warning(env_before, env_after)): print(w)
    out = {"ratios": ratios, "ratios_by_round": per_round, "targets": {"frozen_cached_over_none": 1.03, "joint_over_none": 1.15},
           "runs": res, "settings": vars(a), "n_train": len(train), "backbone": "painn demo",
           "environment_before": env_before, "environment_after": env_after}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1))
    print("wrote", a.out)


if __name__ == "__main__":
    main()
