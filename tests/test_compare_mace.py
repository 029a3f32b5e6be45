"""benchmarks/compare_mace.py: the per-child CPU time that budgets of MACE and ours are compared on."""
import subprocess, sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from compare_mace import run_timed  # noqa: E402

BUSY = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass"


def test_run_timed_counts_the_childs_cpu_not_its_waiting():
    wall, cpu = run_timed([sys.executable, "-c", "import time; time.sleep(0.6)"])
    assert wall >= 0.6 and cpu < 0.3          # asleep: wall time passes, hardly any CPU time
    wall, cpu = run_timed([sys.executable, "-c", BUSY])
    assert cpu >= 0.4 and wall >= 0.4         # busy: at least the 0.4 s of CPU it spun for


def test_run_timed_keeps_side_by_side_children_apart():
    # two children at once (as with --jobs 2): each reports its own CPU time, not the sum of both
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(2) as pool:
        busy, idle = pool.map(lambda code: run_timed([sys.executable, "-c", code]), [BUSY, "import time; time.sleep(0.6)"])
    assert busy[1] >= 0.4 and idle[1] < 0.3


def test_run_timed_raises_on_failure():
    with pytest.raises(subprocess.CalledProcessError) as e:
        run_timed([sys.executable, "-c", "raise SystemExit(3)"])
    assert e.value.returncode == 3
