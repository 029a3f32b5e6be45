"""Sigma_i of the shipped QM9 AniDS generator on 10^4 random H/C/N/O/F structures unlike its training set (2-40 atoms:
dense clusters with close contacts, near-straight chains, flat sheets, atoms far apart), in batches of 50: how many
batches raise in `covariance` and in `predict`, and the range of the eigenvalues of Sigma_i (A^2).

    python benchmarks/sigma_on_odd_geometry.py            # prints the numbers, writes results/checks/sigma_on_odd_geometry.json
"""
import torch, numpy as np, time, warnings, json
from anids.method.checkpoints import load_model
from anids.data.structures import atoms_batch
from ase import Atoms
torch.set_num_threads(1)
warnings.simplefilter("ignore")
model = load_model("data/checkpoints/pretrain_qm9_painn_demo_anids.pt").eval()
rng = np.random.default_rng(0)
def struct():
    na = int(rng.integers(2, 41)); kind = rng.integers(4)
    if kind == 0: pos = rng.uniform(0, 1.0 + na ** (1/3) * 1.2, (na, 3))
    elif kind == 1: pos = np.outer(np.arange(na) * rng.uniform(0.3, 1.6), [1, 0, 0]) + rng.normal(0, 0.01, (na, 3))
    elif kind == 2: pos = np.c_[rng.uniform(0, 5, (na, 2)), np.zeros(na)]
    else: pos = rng.uniform(0, 30, (na, 3))
    return Atoms(numbers=rng.choice([1, 6, 7, 8, 9], na), positions=pos)
S = [struct() for _ in range(10000)]
t = time.time(); raised = {"covariance": 0, "predict": 0}; ev = []; close = 0
for k in range(0, len(S), 50):
    b = atoms_batch(S[k:k+50])
    try:
        with torch.no_grad(): cov = model.covariance(b)
        ev.append(torch.linalg.eigvalsh(cov.matrix.double()))
    except Exception: raised["covariance"] += 1
    try: model.predict(b, allow_untrained=True)
    except Exception: raised["predict"] += 1
ev = torch.cat(ev)
untrained = None
try: model.predict(atoms_batch([S[0]]))
except ValueError as e: untrained = str(e)[:80]
out = {"structures": len(S), "batches_of_50_that_raised": raised, "eigenvalues_A2": [float(ev.min()), float(ev.max())],
       "finite": bool(torch.isfinite(ev).all()), "predict_without_allow_untrained": untrained, "seconds": time.time() - t}
print(json.dumps(out, indent=1))
import pathlib; pathlib.Path("results/checks/sigma_on_odd_geometry.json").write_text(json.dumps({"description": __doc__.splitlines()[0], "units": {"eigenvalues": "A^2", "time": "s"}, **out}, indent=1))
