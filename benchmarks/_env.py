"""What a benchmark result depends on besides the code: the machine, its load, the threading set-up and the package
versions. Every benchmark stores `environment()` taken before and after its runs, so that two results can be told
apart ("same code, 2x slower" is usually load or threads, and this says which)."""
from __future__ import annotations
import datetime, os, platform


def cpu_model() -> str:
    try:
        return next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def _threading() -> dict:
    import torch
    info = torch.__config__.parallel_info().splitlines()
    keep = ("ATen parallel backend", "OpenMP", "MKL", "std::thread::hardware_concurrency")
    return {"torch_threads": torch.get_num_threads(), "torch_interop_threads": torch.get_num_interop_threads(),
            "parallel_info": [l.strip() for l in info if l.strip().startswith(keep)],
            "env": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY", "OMP_PROC_BIND",
                                                   "KMP_BLOCKTIME")}}


def _versions() -> dict:
    try:
        from anids.provenance import versions
        return versions()
    except ImportError:   # a benchmark may run without the package's training extras
        import torch
        return {"torch": torch.__version__, "python": platform.python_version()}


def environment() -> dict:
    "Machine (the GPU torch sees, if any), load, threads and versions now (call before and after the timed runs)."
    try: affinity = len(os.sched_getaffinity(0))
    except AttributeError: affinity = None
    import torch
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"date": datetime.datetime.now().isoformat(timespec="seconds"), "cpu": cpu_model(), "gpu": gpu,
            "logical_cpus": os.cpu_count(), "usable_cpus": affinity, "load_average_1_5_15min": list(os.getloadavg()),
            "platform": platform.platform(), "threading": _threading(), "versions": _versions()}


def load_warning(before: dict, after: dict) -> str|None:
    "A line to print when the machine was busy (1-minute load above the usable CPUs), else None."
    cpus = before.get("usable_cpus") or before.get("logical_cpus") or 1
    worst = max(before["load_average_1_5_15min"][0], after["load_average_1_5_15min"][0])
    if worst > cpus:
        return (f"warning: the machine was busy (1-minute load up to {worst:.1f} on {cpus} CPUs): absolute times are not "
                "comparable with a quiet machine's; the side-by-side ratio is the number to read")
    return None
