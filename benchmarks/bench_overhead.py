"""Epoch time of AniDS fine-tuning relative to training without noise, side by side in one process.

    python benchmarks/bench_overhead.py                     # bundled ethanol (offline), PaiNN demo, 2 threads
    python benchmarks/bench_overhead.py --train my.xyz --threads 1

Three runs on the same structures, backbone and recipe (md17-demo): no noise; AniDS with psi frozen (the shipped QM9
pre-trained generator; its Sigma_i cached once before training, reported separately); AniDS with psi trained jointly
(Algorithm 2 from scratch). Each run's seconds per epoch are the median over its epochs after the first, from the
Lightning epoch-time log. Writes results/bench_overhead.json with the ratios, package versions, CPU model and load."""
import argparse, json, os, platform, statistics, tempfile, time
from pathlib import Path

import torch
from lightning.pytorch.callbacks import Callback

from anids import data as D
from anids.train import make_config, fit
from anids.provenance import versions


class EpochTimer(Callback):
    def __init__(self): self.times, self._t = [], None
    def on_train_epoch_start(self, trainer, module): self._t = time.perf_counter()
    def on_train_epoch_end(self, trainer, module): self.times.append(time.perf_counter() - self._t)


def cpu_model() -> str:
    try:
        return next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train", help="extxyz with energies and forces (default: bundled ethanol)")
    p.add_argument("--n", type=int, default=400, help="training structures (default 400)")
    p.add_argument("--epochs", type=int, default=4, help="epochs per run; the first is not timed (default 4)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "results" / "bench_overhead.json"))
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    frames = D.read_structures(a.train) if a.train else D.load_md17("ethanol")
    train, val = frames[:a.n], frames[a.n:a.n + 20]
    runs = {"none": dict(method="none", pretrained=None), "anids_frozen_cached": dict(method="anids", pretrained="qm9"),
            "anids_joint": dict(method="anids", pretrained=None)}
    res = {}
    load0 = os.getloadavg()
    for name, r in runs.items():
        timer = EpochTimer()
        cfg = make_config("md17-demo", method=r["method"], epochs=a.epochs, threads=a.threads, progress=False,
                          check_val_every_n_epoch=a.epochs)
        with tempfile.TemporaryDirectory() as d:
            m = fit(train, val, cfg, d, pretrained=r["pretrained"], callbacks=[timer])
        res[name] = {"seconds_per_epoch": statistics.median(timer.times[1:]), "epoch_times_s": timer.times,
                     "train_generator": m["config"]["train_generator"],
                     "covariance_cache_s": m["extra"].get("covariance_cache_s")}
        print(f"{name:22s} {res[name]['seconds_per_epoch']:.3f} s/epoch  (epochs {', '.join(f'{t:.2f}' for t in timer.times)})", flush=True)
    base = res["none"]["seconds_per_epoch"]
    ratios = {"frozen_cached_over_none": res["anids_frozen_cached"]["seconds_per_epoch"] / base,
              "joint_over_none": res["anids_joint"]["seconds_per_epoch"] / base}
    print(f"ratios: frozen (cached) / none = {ratios['frozen_cached_over_none']:.3f}; joint / none = {ratios['joint_over_none']:.3f}")
    out = {"ratios": ratios, "runs": res, "settings": vars(a), "n_train": len(train), "backbone": "painn demo",
           "cpu": cpu_model(), "load_average_before": load0, "load_average_after": os.getloadavg(), "versions": versions()}
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1))
    print("wrote", a.out)


if __name__ == "__main__":
    main()
