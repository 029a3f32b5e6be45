"""Each paper chain end to end at smoke size on the CPU: Algorithm 1 at the table's pre-training budget for 2 steps
(on a few structures made here), then the table's fine-tuning recipe for 1 epoch on a tiny file in the table's own
format, through the project's own functions and notebooks. A GPU user runs the same calls with the real data and
sizes; where a test shrinks a network to its `tiny` preset for speed, it also checks that the real budget builds the
backbone and presets the recipe loads, so the full-size chain cannot mismatch."""
import bz2, json, pickle
from pathlib import Path
import numpy as np
import pytest
import torch
from ase import units
from ase.build import bulk, molecule
from ase.calculators.emt import EMT

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
KCAL = units.kcal / units.mol   # eV per kcal/mol: the MD17-family files store kcal/mol and kcal/mol/A


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _ethanol(n, seed=0):
    "Ethanol rattled around one geometry, labelled by EMT (a toy potential that runs anywhere)."
    out = []
    for k in range(n):
        a = molecule("CH3CH2OH"); a.rattle(0.05, seed=1000 * seed + k); a.calc = EMT(); a.get_potential_energy(); out.append(a)
    return out


def _arrays(frames):
    "Positions (A), energies (kcal/mol) and forces (kcal/mol/A) of labelled frames, as the MD17-family files hold them."
    return (np.array([a.positions for a in frames]), np.array([a.get_potential_energy() / KCAL for a in frames]),
            np.array([a.get_forces() / KCAL for a in frames]))


def _copper(n, seed=0, strain=0.0):
    "Rattled, strained fcc copper cells labelled by EMT (energy, forces, stress)."
    out = []
    for k in range(n):
        a = bulk("Cu", "fcc", a=3.6, cubic=True); a.rattle(0.05, seed=seed + k)
        a.set_cell(a.cell.array * (1 + strain + 0.01 * (k % 3 - 1)), scale_atoms=True); a.calc = EMT(); out.append(a)
    return out


def _pretrain(method, budget, frames, checkpoint_dir, **overrides):
    "Algorithm 1 at a pre-training budget for 2 steps on `frames` (positions only), writing the named checkpoint."
    from anids.data.structures import atoms_to_data
    from anids.train.pretraining import pretrain
    sets = [atoms_to_data(a) for a in frames]
    return pretrain(method, budget=budget, sets=(sets[:4], sets[4:]), steps=2, batch_size=2, checkpoint_dir=checkpoint_dir,
                    out_dir=Path(checkpoint_dir) / "runs", progress=False, threads=1, **overrides)


@pytest.fixture(scope="module")
def paper_md17_checkpoint(tmp_path_factory):
    """The `paper-md17` pre-training (Equiformer L=2, full size) for 2 steps: the weights of Tables 1 and 7."""
    d = tmp_path_factory.mktemp("paper_md17")
    r = _pretrain("anids", "paper-md17", _ethanol(6, seed=7), d)
    assert Path(r["checkpoint"]).name == "pretrain_pcqm4mv2_equiformer_md17_anids.pt" and r["steps"] == 2
    return Path(r["checkpoint"])


def _started_from(run_dir) -> Path:
    "The checkpoint a fine-tuning run (finetune_sets' folder) started from, as its metrics.json records it."
    return Path(json.loads((Path(run_dir) / "finetune" / "metrics.json").read_text())["pretrained"])


def test_table1_md17_chain(tmp_path, monkeypatch, paper_md17_checkpoint):
    """Table 1: `paper-md17` pre-training -> nbs/md17_finetune.ipynb at the paper budget (md17-paper, Equiformer L=2, psi
    frozen) on an MD17-format npz, the checkpoint found by name as the notebook's default (`pretrained="budget"`)."""
    import papermill as pm
    from anids.train import make_config, PRETRAIN_BUDGETS
    b, r = PRETRAIN_BUDGETS["paper-md17"], make_config("md17-paper")
    assert (b["backbone"], b["backbone_preset"]) == (r.backbone, r.preset) == ("equiformer", "md17")
    monkeypatch.setenv("ANIDS_CHECKPOINT_DIR", str(paper_md17_checkpoint.parent))
    R, E, F = _arrays(_ethanol(8))
    (tmp_path / "cache" / "md17").mkdir(parents=True)
    np.savez(tmp_path / "cache" / "md17" / "md17_ethanol.npz", R=R, z=molecule("CH3CH2OH").numbers, E=E[:, None], F=F)
    params = dict(molecule="ethanol", budget="paper", dataset="md17", data_dir=str(tmp_path / "cache"), epochs=1, n_train=4,
                  n_val=2, max_test=2, threads=1, out_dir=str(tmp_path / "runs"), results_dir=str(tmp_path / "results"),
                  figures_dir=str(tmp_path / "fig"))
    pm.execute_notebook(str(NBS / "md17_finetune.ipynb"), str(tmp_path / "out.ipynb"), parameters=params, cwd=str(NBS),
                        progress_bar=False)
    (res,) = (tmp_path / "results").glob("*.json")
    out = json.loads(res.read_text())
    assert out["budget"] == "paper" and out["backbone"] == "equiformer" and out["config"]["preset"] == "md17"
    assert out["pretrained"] == "pcqm4mv2" and out["config"]["train_generator"] is False   # the budget's name, resolved by fit:
    assert _started_from(out["run_dir"]) == paper_md17_checkpoint
    assert out["test"]["n_structures"] == 2 and np.isfinite(out["force_mae_kcal_mol_A"])
    # without the checkpoint the notebook stops before reading data, naming the command that makes it
    monkeypatch.setenv("ANIDS_CHECKPOINT_DIR", str(tmp_path / "none"))
    with pytest.raises(pm.PapermillExecutionError, match=r"papermill nbs/pretrain.ipynb out.ipynb -p method anids -p budget paper-md17"):
        pm.execute_notebook(str(NBS / "md17_finetune.ipynb"), str(tmp_path / "out2.ipynb"), parameters=params, cwd=str(NBS),
                            progress_bar=False)


def test_table6_rmd17_chain(tmp_path, monkeypatch):
    """Table 6: `paper` pre-training (EquiformerV2 L=3, preset rmd17, full size) -> rmd17-paper on the rMD17 layout
    (npz_data/rmd17_<molecule>.npz and the official split files), through run_benchmark at the paper budget."""
    from anids.experiments.benchmarks import run_benchmark
    from anids.data.labelled_sets import rmd17_sets
    _pretrain("anids", "paper", _ethanol(6, seed=8), tmp_path / "ckpt")
    monkeypatch.setenv("ANIDS_CHECKPOINT_DIR", str(tmp_path / "ckpt"))
    root = tmp_path / "cache" / "rmd17" / "rmd17"
    (root / "npz_data").mkdir(parents=True); (root / "splits").mkdir()
    R, E, F = _arrays(_ethanol(10))
    np.savez(root / "npz_data" / "rmd17_ethanol.npz", nuclear_charges=molecule("CH3CH2OH").numbers, coords=R, energies=E, forces=F)
    np.savetxt(root / "splits" / "index_train_01.csv", np.arange(0, 8), fmt="%d")
    np.savetxt(root / "splits" / "index_test_01.csv", np.arange(8, 10), fmt="%d")
    (rec,) = run_benchmark("rmd17", lambda seed: rmd17_sets("ethanol", 1, 2, 2, seed, tmp_path / "cache"), methods=["anids"],
                           seeds=[0], budget="paper", out_dir=tmp_path / "runs", threads=1, epochs=1)
    assert (rec["backbone"], rec["preset"], rec["recipe"]) == ("equiformer_v2", "rmd17", "rmd17-paper")
    assert rec["pretrained"] == "pcqm4mv2" and rec["train_generator"] is False   # the budget's name, resolved by fit:
    assert _started_from(rec["run_dir"]) == tmp_path / "ckpt" / "pretrain_pcqm4mv2_equiformer_v2_rmd17_anids.pt"
    assert rec["n_test"] == 2 and np.isfinite(rec["force_mae_meV_A"])


def test_table7_md22_chain(tmp_path, monkeypatch, paper_md17_checkpoint):
    """Table 7: `paper-md17` pre-training -> md17-paper (Equiformer L=2: the paper's MD22 row) on an MD22-format npz,
    through run_benchmark at the paper budget."""
    from anids.experiments.benchmarks import run_benchmark, BENCHMARK_BUDGETS
    from anids.data.labelled_sets import md22_sets
    assert BENCHMARK_BUDGETS["md22"]["paper"] == dict(recipe="md17-paper", pretrained="pcqm4mv2")
    monkeypatch.setenv("ANIDS_CHECKPOINT_DIR", str(paper_md17_checkpoint.parent))
    (tmp_path / "cache" / "md22").mkdir(parents=True)
    R, E, F = _arrays(_ethanol(8, seed=3))
    np.savez(tmp_path / "cache" / "md22" / "md22_AT-AT-CG-CG.npz", z=molecule("CH3CH2OH").numbers, R=R, E=E, F=F)
    (rec,) = run_benchmark("md22", lambda seed: md22_sets("AT-AT-CG-CG", 2, 2, seed, tmp_path / "cache", max_test=2),
                           methods=["anids"], seeds=[0], budget="paper", out_dir=tmp_path / "runs", threads=1, epochs=1)
    assert (rec["backbone"], rec["preset"], rec["recipe"]) == ("equiformer", "md17", "md17-paper")
    assert rec["pretrained"] == "pcqm4mv2" and rec["train_generator"] is False
    assert _started_from(rec["run_dir"]) == paper_md17_checkpoint
    assert rec["n_test"] == 2 and np.isfinite(rec["force_mae_meV_A"])


def _write_extxyz(structures, path):
    "Structures read by one of the project's readers, written as extended XYZ, the files the crystal tables train on."
    import ase.io
    from anids.data.structures import data_to_atoms
    ase.io.write(path, [data_to_atoms(d) for d in structures], format="extxyz")
    return path


def _oc22_lmdb(path, frames):
    "An OC22 S2EF-Total LMDB as fairchem writes it: keys b'0', b'1', ... and b'length', values pickled torch_geometric Data."
    import lmdb
    from torch_geometric.data import Data
    env = lmdb.open(str(path), subdir=False, map_size=1 << 26)
    with env.begin(write=True) as txn:
        for i, a in enumerate(frames):
            d = Data(pos=torch.tensor(a.positions, dtype=torch.float32), cell=torch.tensor(a.cell.array, dtype=torch.float32)[None],
                     atomic_numbers=torch.tensor(a.numbers, dtype=torch.float32), natoms=len(a),
                     tags=torch.ones(len(a), dtype=torch.long), fixed=torch.zeros(len(a)), sid=i, fid=0,
                     y=float(a.get_potential_energy()), force=torch.tensor(a.get_forces(), dtype=torch.float32))
            txn.put(str(i).encode("ascii"), pickle.dumps(d, protocol=-1))
        txn.put(b"length", pickle.dumps(len(frames)))
    env.close()
    return path


def test_table2_oc22_chain(tmp_path):
    """Table 2: DeNS weights of the recipe's backbone (stand-in: Algorithm 1 with DeNS, 2 steps, EquiformerV2 with direct
    forces) -> the oc22 recipe (psi trained jointly after the KL warm-up) on OC22 S2EF-Total LMDBs read by
    read_oc22_lmdb, at the tiny preset for speed; the real recipe's backbone, presets and force mode checked statically."""
    from anids.data.oc22 import read_oc22_lmdb
    from anids.experiments.crystals import CRYSTAL_TABLES, crystal_setup, run_setup
    from anids.train import make_config, pretrain_command
    oc22 = make_config("oc22")
    assert (oc22.backbone, oc22.preset, oc22.generator_preset, oc22.force_mode) == ("equiformer_v2", "oc22", "oc22_generator", "direct")
    # the full-size pre-training that fits it: the budget with the recipe's backbone, presets (and its direct forces below)
    assert ("budget='paper', backbone='equiformer_v2', backbone_preset='oc22', generator_preset='oc22_generator'"
            in pretrain_command("pcqm4mv2", make_config("oc22", method="dens")))
    paper = tmp_path / "oc22"; paper.mkdir()
    files = CRYSTAL_TABLES["oc22"]["paper_files"]
    for split, name, frames in (("train", files["train"], _copper(8)), ("val_id", files["tests"]["id"], _copper(2, 100)),
                                ("val_ood", files["tests"]["ood"], _copper(2, 200, strain=0.03))):
        (tmp_path / "lmdb" / split).mkdir(parents=True)
        _oc22_lmdb(tmp_path / "lmdb" / split / "data.0000.lmdb", frames)
        _write_extxyz(read_oc22_lmdb(tmp_path / "lmdb" / split), paper / name)
    tiny = dict(backbone_preset="tiny", generator_preset="tiny")
    r = _pretrain("dens", "paper", _copper(6, 300), tmp_path / "ckpt", backbone="equiformer_v2", force_mode="direct", **tiny)
    setup = crystal_setup("oc22", "paper", paper_dir=paper, epochs=1, pretrained=r["checkpoint"], **tiny)
    assert (setup.recipe, setup.backbone, setup.config.force_mode) == ("oc22", "equiformer_v2", "direct")
    (rec,) = run_setup(setup, methods=["anids"], seeds=[0], out_dir=tmp_path / "runs", threads=1)
    assert rec["status"] == "trained" and rec["train_generator"] is True and Path(rec["pretrained"]) == Path(r["checkpoint"])
    assert set(rec["tests"]) == {"id", "ood"} and all(np.isfinite(t["force_mae_meV_A"]) for t in rec["tests"].values())


def _pymatgen(a):
    "What pymatgen's Structure.as_dict() writes for an ordered crystal (the fields the MPtrj and Alexandria readers take)."
    sites = [{"species": [{"element": s, "occu": 1}], "abc": abc.tolist(), "xyz": xyz.tolist(), "label": s, "properties": {}}
             for s, xyz, abc in zip(a.get_chemical_symbols(), a.positions, a.get_scaled_positions(wrap=False))]
    return {"@module": "pymatgen.core.structure", "@class": "Structure", "charge": 0,
            "lattice": {"matrix": a.cell.array.tolist(), "pbc": [True, True, True]}, "sites": sites}


def test_table4_mptrj_alexandria_chain(tmp_path):
    """Table 4: the mptrj recipe (GeoMFormer, full size; the paper trains it from scratch with psi jointly: no
    pre-training) trained on an MPtrj JSON (read_mptrj) and tested on an Alexandria JSON (iter_alexandria)."""
    from anids.data.materials import KBAR
    from anids.data.mptrj import read_mptrj, iter_alexandria
    from anids.experiments.crystals import CRYSTAL_TABLES, crystal_setup, run_setup
    frame = lambda a: {"structure": _pymatgen(a), "uncorrected_total_energy": a.get_potential_energy(),
                       "corrected_total_energy": a.get_potential_energy(), "force": a.get_forces().tolist(),
                       "stress": (-a.get_stress(voigt=False) / KBAR).tolist(), "mp_id": "mp-30"}
    mptrj = {"mp-30": {f"task-30-0-{k}": frame(a) for k, a in enumerate(_copper(12))}}
    (tmp_path / "MPtrj_2022.9_full.json").write_text(json.dumps(mptrj))
    entries = []
    for k, a in enumerate(_copper(3, 500, strain=0.02)):
        s = _pymatgen(a)
        for site, f in zip(s["sites"], a.get_forces()): site["properties"] = {"forces": f.tolist()}
        entries.append({"structure": s, "data": {"mat_id": f"agm{k:09d}", "energy_total": a.get_potential_energy(),
                                                 "energy_corrected": a.get_potential_energy(),
                                                 "stress": (-a.get_stress(voigt=False) / KBAR).tolist()}})
    (tmp_path / "alexandria_000.json.bz2").write_bytes(bz2.compress(json.dumps({"entries": entries}).encode()))
    paper = tmp_path / "mptrj"; paper.mkdir()
    files = CRYSTAL_TABLES["mptrj_alexandria"]["paper_files"]
    _write_extxyz(read_mptrj(tmp_path / "MPtrj_2022.9_full.json"), paper / files["train"])
    _write_extxyz(list(iter_alexandria(tmp_path / "alexandria_000.json.bz2")), paper / files["tests"]["alexandria"])
    setup = crystal_setup("mptrj_alexandria", "paper", paper_dir=paper, epochs=1, batch_size=4)
    assert (setup.recipe, setup.backbone, setup.backbone_preset) == ("mptrj", "geomformer", "mptrj")
    (rec,) = run_setup(setup, methods=["anids"], seeds=[0], out_dir=tmp_path / "runs", threads=1)
    assert rec["status"] == "trained" and rec["train_generator"] is True and rec["pretrained"] is None
    t = rec["tests"]["alexandria"]
    assert t["n_structures"] == 3 and np.isfinite(t["force_mae_meV_A"]) and np.isfinite(t["stress_mae_GPa"])
