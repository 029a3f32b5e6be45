"""Lightning DDP on 2 CPU processes (gloo): both ranks must end with identical weights."""
import json, os, subprocess, sys
import pytest
from ase.build import molecule
from ase.calculators.emt import EMT
from ase.io import write


def _frames(n, seed):
    out = []
    for k in range(n):
        a = molecule("CH3CH2OH"); a.rattle(0.05, seed=seed + k); a.calc = EMT()
        a.get_potential_energy(); a.get_forces(); out.append(a)
    return out


def test_two_process_ddp_ranks_agree(tmp_path):
    write(tmp_path / "train.xyz", _frames(16, 0))
    write(tmp_path / "val.xyz", _frames(4, 50))
    cmd = [sys.executable, "-m", "anids.train.cli", "--train", str(tmp_path / "train.xyz"), "--val", str(tmp_path / "val.xyz"),
           "--preset", "tiny", "--generator-preset", "tiny", "--method", "anids", "--train-generator",
           "--epochs", "2", "--batch-size", "4", "--devices", "2", "--strategy", "ddp", "--accelerator", "cpu",
           "--no-progress", "--out", str(tmp_path / "run")]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    m = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert m["world_size"] == 2
    a, b = m["rank_parameter_checksums"]
    assert a == pytest.approx(b, rel=0, abs=1e-9), m["rank_parameter_checksums"]
    # 16 structures, batch 4, 2 ranks: 2 optimiser steps per epoch
    from anids.method.checkpoints import read_checkpoint
    ck = read_checkpoint(tmp_path / "run" / "checkpoints" / "last.ckpt")
    assert ck["global_step"] == 2 * 2
