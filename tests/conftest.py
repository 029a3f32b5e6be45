"""Under pytest-xdist (`pytest -n N`, as pyproject's addopts ask) each worker gets its share of the cores, so that N
workers never run more threads than there are cores."""
import os

if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    import torch
    torch.set_num_threads(max(1, (os.cpu_count() or 2) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))
