"""The notebooks are the source of truth: each library notebook runs (its test cells included), `nbdev_export`
reproduces `anids/` exactly, and the experiment notebooks run end to end with small settings (papermill)."""
import filecmp, json, os, shutil, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
# the library notebooks: nbs/00_provenance, then each layer's folder (data, nn, method, train, analysis, experiments)
LIBRARY = sorted(NBS.rglob("[0-9][0-9]*_*.ipynb"))
# the cores shared between pytest-xdist's workers (pytest -n N): more threads than cores would make every one wait
THREADS = str(max(1, (os.cpu_count() or 2) // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))
ENV = dict(os.environ, OMP_NUM_THREADS=THREADS, OMP_WAIT_POLICY="PASSIVE", PYTHONUNBUFFERED="1", MPLBACKEND="Agg")


def test_there_are_library_notebooks():
    assert len(LIBRARY) >= 9, [p.name for p in LIBRARY]


@pytest.mark.parametrize("nb", LIBRARY, ids=lambda p: p.relative_to(NBS).with_suffix("").as_posix())
def test_library_notebook(nb):
    # nbdev's test_nb runs one notebook the way `nbdev-test` does (skipping `#| eval: false` cells), in a fresh process
    code = "import sys; from nbdev.test import test_nb; ok, _ = test_nb(sys.argv[1]); sys.exit(0 if ok else 1)"
    res = subprocess.run([sys.executable, "-c", code, str(nb)], capture_output=True, text=True, cwd=ROOT, env=ENV,
                         timeout=900)
    assert res.returncode == 0, (res.stdout + res.stderr)[-6000:]


def test_nbdev_export_changes_nothing(tmp_path):
    work = tmp_path / "repo"
    shutil.copytree(NBS, work / "nbs")
    shutil.copytree(ROOT / "anids", work / "anids_committed", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", work)
    (work / "anids").mkdir()
    shutil.copy(ROOT / "anids" / "__init__.py", work / "anids")
    res = subprocess.run([sys.executable, "-c", "import sys; sys.argv=['nbdev-export']; from nbdev.doclinks import nbdev_export; nbdev_export()"],
                         capture_output=True, text=True, cwd=work, env=ENV, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    cmp = filecmp.dircmp(work / "anids_committed", work / "anids", ignore=["__pycache__"])
    def diffs(c, prefix=""):
        out = [prefix + f for f in c.left_only + c.right_only + c.diff_files]
        for name, sub in c.subdirs.items(): out += diffs(sub, prefix + name + "/")
        return out
    assert diffs(cmp) == [], f"anids/ differs from what nbdev_export makes of nbs/: {diffs(cmp)}"


def _papermill(nb, out, params):
    import papermill as pm
    # no kernel_name: the notebook must name its kernel itself, as the README command relies on
    return pm.execute_notebook(str(nb), str(out), parameters=params, cwd=str(NBS),
                               progress_bar=False)


def test_md17_notebook_runs_offline(tmp_path):
    params = dict(molecule="ethanol", noise="anids", epochs=1, pretrain_epochs=1, n_train=40, n_val=10, max_test=20,
                  out_dir=str(tmp_path / "runs"), results_dir=str(tmp_path / "results"), figures_dir=str(tmp_path / "fig"))
    _papermill(NBS / "md17_finetune.ipynb", tmp_path / "out.ipynb", params)
    (res,) = list((tmp_path / "results").glob("*.json"))
    r = json.loads(res.read_text())
    assert r["molecule"] == "ethanol" and r["method"] == "anids" and r["dataset"] == "bundled" and r["budget"] == "demo"
    assert r["test"]["n_structures"] == 20 and r["force_mae_kcal_mol_A"] > 0
    assert r["versions"]["torch"] and "provenance" in r["data"]
    assert list((tmp_path / "fig").glob("*.png"))
    # what a reader of the executed notebook sees: the data line with its MD temperature, no framework chatter
    import nbformat
    text = "\n".join(o.get("text", "") if o.get("output_type") == "stream" else str(o.get("data", {}).get("text/plain", ""))
                     for c in nbformat.read(tmp_path / "out.ipynb", as_version=4).cells if c.cell_type == "code"
                     for o in c.get("outputs", []))
    assert "Langevin MD at 500 K" in text and "None K" not in text
    for noise in ("Tip:", "IProgress", "LeafSpec", "GPU available", "\x1b[A", "Validation"):
        assert noise not in text, f"{noise!r} in the executed notebook's output"


def test_computational_cost_notebook_runs(tmp_path):
    params = dict(backbone="painn", preset="tiny", generator_preset="tiny", molecule="ethanol", n_train=8, epochs=1,
                  results_dir=str(tmp_path / "results"), figures_dir=str(tmp_path / "fig"), threads=1)
    _papermill(NBS / "computational_cost.ipynb", tmp_path / "out.ipynb", params)
    (res,) = list((tmp_path / "results").glob("computational_cost_*.json"))
    rows = json.loads(res.read_text())["rows"]
    assert [r["method"] for r in rows] == ["none", "dens", "denoisevae", "anids"]
    assert rows[-1]["n_parameters"] > rows[0]["n_parameters"]


def test_report_notebook_runs(tmp_path):
    """nbs/report.ipynb on the repository's results/: every paper table in report.md and report.tex, ours beside the
    paper's where a results file exists, 'not run yet' where none does, and every results file accounted for."""
    import re
    import statistics
    from anids.results.paper import PAPER_TABLES
    from anids.results.sections import RUN_SCHEMAS
    from anids.data.units import force_factor
    out = tmp_path / "rep" / "report.md"
    shutil.copytree(ROOT / "figures", tmp_path / "fig")   # the figures the studies' pages show beside the report's
    _papermill(NBS / "report.ipynb", tmp_path / "out.ipynb",
               dict(results_dir=str(ROOT / "results"), figures_dir=str(tmp_path / "fig"), out=str(out),
                    pages_dir=str(tmp_path / "pages"), index=str(tmp_path / "RESULTS.md")))
    text, latex = out.read_text(), out.with_suffix(".tex").read_text()
    flat = re.sub(" +", " ", text)   # tabulate pads the cells
    for t in PAPER_TABLES.values():
        assert f"## {t.title}\n" in text, t.title
    assert "| AniDS (Lmax=2) | 0.102 (+15.0%) | 0.139 (+1.4%) |" in flat and "| ICTP | 40.19 | 2.45 | 11.24 | 25.97 |" in flat
    sections = re.split(r"\n## ", text)
    for kind, schema in RUN_SCHEMAS.items():
        if schema["table"] and not list((ROOT / "results").glob(f"{kind}_*.json")):
            (sec,) = [s for s in sections if s.startswith(PAPER_TABLES[schema["table"]].title.split(": ", 1)[0] + ":")]
            assert "**Our side: not run yet.**" in sec and "| not run yet |" in flat, kind
    for f in (ROOT / "results").glob("*.json"):
        assert f"| {f.name} |" in flat and "not read by any table" not in flat.rsplit(f"| {f.name} |", 1)[1].split("\n")[0], f.name
    abl = ROOT / "results" / "ablation_ethanol_cpu.json"
    if abl.is_file():   # ours beside the paper's, converted to kcal/mol/A, mean ± std over seeds
        runs = [r["test"]["force_mae_meV_A"] * 1e-3 / force_factor("kcal/mol/A") for r in json.loads(abl.read_text())["runs"]
                if r["row"] == "anids"]
        cell = f"{statistics.mean(runs):.4f} ± {statistics.stdev(runs):.4f} (n={len(runs)})"
        assert f"| EqV2-AniDS | 0.1118 | -42.0 % | {cell} |" in flat, cell
    assert latex.startswith(r"\documentclass") and latex.rstrip().endswith(r"\end{document}")
    assert latex.count(r"\begin{tabular}") == latex.count(r"\end{tabular}") >= len(PAPER_TABLES)
    assert (tmp_path / "fig" / "report_md17.png").stat().st_size > 10_000
    assert "![md17](../fig/report_md17.png)" in text
    # and the studies' pages (tests/test_results_pages.py compares them with the committed ones)
    pages = sorted(p.name for p in (tmp_path / "pages").glob("*.md"))
    assert pages and pages == sorted(p.name for p in (ROOT / "docs" / "results").glob("*.md"))
    assert all(f"](pages/{name})" in (tmp_path / "RESULTS.md").read_text() for name in pages)


def test_ablation_notebook_makes_a_results_file_from_runs(tmp_path):
    """nbs/ablation.ipynb on a runs file as run_ablation writes it (results_path: runs, no table): a results file with
    the table (mean over seeds, paired differences), the rows and seeds of its runs, and the figure."""
    runs = [{"row": row, "table": "a", "method": row.split(",")[0], "seed": seed, "epochs": 10, "recipe": "md17-demo",
             "test": {"force_mae_meV_A": mae + seed, "force_rmse_meV_A": 1.5 * (mae + seed), "energy_mae_meV_atom": 2.5}}
            for seed in (0, 1) for row, mae in (("none", 60.0), ("dens", 51.0), ("none, energy-std losses", 57.0))]
    (tmp_path / "runs.json").write_text(json.dumps({"runs": runs, "versions": {"git_revision": "abc", "git_dirty": False}}))
    _papermill(NBS / "ablation.ipynb", tmp_path / "out.ipynb",
               dict(from_results=str(tmp_path / "runs.json"), results_name="made", results_dir=str(tmp_path / "res"),
                    figures_dir=str(tmp_path / "fig"), workers=1))
    made = json.loads((tmp_path / "res" / "made.json").read_text())
    table = {e["row"]: e for e in made["table"]}
    assert {r: e["mean"] for r, e in table.items()} == {"none": 60.5, "dens": 51.5, "none, energy-std losses": 57.5}
    assert table["none, energy-std losses"]["vs none"]["mean_diff"] == -3.0 and table["dens"]["vs none"]["n"] == 2
    assert made["settings"]["rows"] == ["none", "dens", "none, energy-std losses"] and made["settings"]["seeds"] == [0, 1]
    assert made["versions"] == {"git_revision": "abc", "git_dirty": False} and "seeds 0, 1;" in made["description"]
    assert (tmp_path / "fig" / "made.png").stat().st_size > 5_000


def _copper_mlearn_files(d: Path) -> dict:
    "The EMT copper set of the crystals notebook (training with a strained series, test, ood), in d/Cu."
    from anids.data.mlearn import emt_copper_set
    return emt_copper_set(d / "Cu", n_rattled=6)


def _crystal_params(tmp_path, files, **kw):
    return dict(budget="demo", element="Cu", train_file=str(files["train"]), epochs=1, seeds=[0],
                out_dir=str(tmp_path / "runs"), results_dir=str(tmp_path / "results"), figures_dir=str(tmp_path / "fig"), **kw)


def test_oc22_notebook_runs(tmp_path):
    """nbs/oc22.ipynb at a tiny size: none / DeNS / AniDS, one seed, one epoch, on copper cells with EMT labels and an
    OOD test set; the results file is in the report's mlearn schema (a CPU preset never writes Table 2's file)."""
    from anids.results.sections import read_runs
    files = _copper_mlearn_files(tmp_path)
    _papermill(NBS / "oc22.ipynb", tmp_path / "out.ipynb",
               _crystal_params(tmp_path, files, test_files={"id": str(files["test"]), "ood": str(files["ood"])}))
    (res,) = list((tmp_path / "results").glob("*.json"))
    assert res.name == "mlearn_Cu_painn_tiny_1ep.json" and not list((tmp_path / "results").glob("oc22_*"))
    top, runs = read_runs(res, "mlearn")
    assert [(r["method"], r["seed"], r["system"]) for r in runs] == [("none", 0, "Cu"), ("dens", 0, "Cu"), ("anids", 0, "Cu")]
    for r in runs:   # the JSON holds what each run's metrics.json says
        m = json.loads((tmp_path / "runs" / f"Cu_{r['method']}_s0" / "metrics.json").read_text())["test"]
        assert r["force_mae_meV_A"] == m["force_mae_meV_A"] and r["stress_mae_GPa"] == m["stress_mae_GPa"] > 0
        assert (tmp_path / "runs" / f"Cu_{r['method']}_s0" / "test_ood.json").is_file()
    s = top["summary"]["force_mae_meV_A"]
    assert s["anids"]["vs none"]["diffs"]["0"] == runs[2]["force_mae_meV_A"] - runs[0]["force_mae_meV_A"]
    assert top["test_set"] == "id" and top["missing"] == [] and top["backbone"] == "painn" and top["preset"] == "tiny"
    assert top["budget"] == "demo"   # the experiment's budget; "preset" is the backbone's size
    assert (tmp_path / "fig" / "oc22_demo_Cu_1ep.png").stat().st_size > 10_000
    # AniDS fine-tuned from pre-trained weights (here the AniDS run's own), beside the table's none run as its baseline:
    # its own results file, named by the weights, holding both, paired by seed
    _papermill(NBS / "oc22.ipynb", tmp_path / "out_pre.ipynb",
               {**_crystal_params(tmp_path, files, test_files={"id": str(files["test"]), "ood": str(files["ood"])}),
                "methods": ["anids"], "pretrained": str(tmp_path / "runs" / "Cu_anids_s0" / "model.pt"),
                "baseline_from": str(res), "out_dir": str(tmp_path / "runs_pre")})
    top_pre, runs_pre = read_runs(tmp_path / "results" / "mlearn_Cu_painn_tiny_1ep_pretrainedmodel.json", "mlearn")
    assert [(r["method"], r.get("pretrained")) for r in runs_pre] == [("none", None), ("anids", str(tmp_path / "runs" / "Cu_anids_s0" / "model.pt"))]
    assert top_pre["baseline_from"] == str(res) and runs_pre[0]["force_mae_meV_A"] == runs[0]["force_mae_meV_A"]
    assert top_pre["summary"]["force_mae_meV_A"]["anids"]["vs none"]["n"] == 1
    # from_results: the figure again from the results file alone (run folders gone), nothing trained or rewritten
    import shutil
    stored = res.read_text()
    shutil.rmtree(tmp_path / "runs"); (tmp_path / "fig" / "oc22_demo_Cu_1ep.png").unlink()
    _papermill(NBS / "oc22.ipynb", tmp_path / "out2.ipynb",
               _crystal_params(tmp_path, files, test_files={"id": str(files["test"]), "ood": str(files["ood"])}, from_results=str(res)))
    assert (tmp_path / "fig" / "oc22_demo_Cu_1ep.png").stat().st_size > 10_000 and res.read_text() == stored
    assert not (tmp_path / "runs").exists()
    # MACE trained afterwards, one file per seed: with mace_budget its row and both budgets go into the results file
    mace_files = []
    for seed, f in ((0, 11.0), (1, 13.0)):
        mace_files.append(tmp_path / f"mace_s{seed}.json")
        mace_files[-1].write_text(json.dumps({"runs": [{"model": "mace", "seed": seed, "epochs": 3, "cpu_time_s": 40.0 + seed,
                                                         "force_mae_meV_A": f, "stress_mae_GPa": 0.5}]}))
    _papermill(NBS / "oc22.ipynb", tmp_path / "out3.ipynb",
               _crystal_params(tmp_path, files, test_files={"id": str(files["test"]), "ood": str(files["ood"])}, from_results=str(res),
                               mace_results=[str(f) for f in mace_files], mace_budget="3 epochs, about our CPU time"))
    top3, runs3 = read_runs(res, "mlearn")
    assert runs3 == runs and top3["mace"]["metrics"]["force_mae_meV_A"]["mean"] == 12.0
    assert top3["mace"]["budget"]["how"] == "3 epochs, about our CPU time" and top3["mace"]["budget"]["mace_cpu_time_s"] == [40.0, 41.0]
    assert set(top3["mace"]["budget"]["ours_train_time_s"]) == {"none s0", "dens s0", "anids s0"}


def test_mptrj_alexandria_notebook_runs_and_reads(tmp_path):
    """nbs/mptrj_alexandria.ipynb at a tiny size: trains none and AniDS (one seed, one epoch), then, read-only, shows the
    table of the finished runs and lists the run that is missing (DeNS) without training it. The `overrides`
    parameter reaches every run's config and names the results and the figure."""
    from anids.results.sections import read_runs
    files = _copper_mlearn_files(tmp_path)
    params = _crystal_params(tmp_path, files, test_files=str(files["test"]), overrides={"lr": 0.002})
    _papermill(NBS / "mptrj_alexandria.ipynb", tmp_path / "out.ipynb", {**params, "methods": ["none", "anids"]})
    res = tmp_path / "results" / "mlearn_Cu_painn_tiny_1ep_lr0.002.json"
    top, first = read_runs(res, "mlearn")
    assert top["settings"]["config"]["lr"] == 0.002 and "1 epochs, lr 0.002; test errors" in top["description"]
    for r in first: assert json.loads((tmp_path / "runs" / f"Cu_{r['method']}_s0" / "metrics.json").read_text())["config"]["lr"] == 0.002
    res.unlink()
    # read_only: the finished runs are read back, a missing one is listed, nothing trains
    _papermill(NBS / "mptrj_alexandria.ipynb", tmp_path / "out2.ipynb", {**params, "read_only": True})
    top, runs = read_runs(res, "mlearn")
    assert [(r["method"], r["force_mae_meV_A"]) for r in runs] == [(r["method"], r["force_mae_meV_A"]) for r in first]
    assert [m["method"] for m in top["missing"]] == ["dens"] and not (tmp_path / "runs" / "Cu_dens_s0").exists()
    assert top["settings"]["statuses"] == {"none s0": "read", "dens s0": "missing", "anids s0": "read"}
    assert top["units"]["stress"] == "GPa" and (tmp_path / "fig" / "mptrj_alexandria_demo_Cu_1ep_lr0.002.png").is_file()
    import nbformat
    text = "\n".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
                     for c in nbformat.read(tmp_path / "out2.ipynb", as_version=4).cells if c.cell_type == "code"
                     for o in c.get("outputs", []))
    assert "dens     seed 0: missing (no run folder)" in text and "EquiformerV2 + AniDS (ours)" in text


def _ethanol_emt_frames(n, seed=0):
    "Ethanol rattled around one geometry, labelled by EMT (a toy potential that runs anywhere)."
    from ase.build import molecule
    from ase.calculators.emt import EMT
    out = []
    for k in range(n):
        a = molecule("CH3CH2OH"); a.rattle(0.05, seed=1000 * seed + k); a.calc = EMT(); a.get_potential_energy(); out.append(a)
    return out


def _outputs(path):
    import nbformat
    return "\n".join(o.get("text", "") if o.get("output_type") == "stream" else str(o.get("data", {}).get("text/plain", ""))
                     for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code" for o in c.get("outputs", []))


TINY = dict(epochs=1, backbone_preset="tiny", generator_preset="tiny", pretrained=None, seeds=[0, 1], threads=1)


def test_rmd17_notebook_cpu_budget(tmp_path):
    """nbs/rmd17.ipynb, cpu budget, on a pair of extxyz files written here: 8 + 4 structures drawn per seed from the
    training file, the whole test file for testing, a results file the report reads into Table 6's section."""
    from ase.io import write
    from anids.results.sections import read_runs
    from anids.report.build import rmd17_section
    frames = _ethanol_emt_frames(36)
    write(tmp_path / "train.xyz", frames[:24]); write(tmp_path / "test.xyz", frames[24:])
    params = dict(TINY, budget="cpu", train_file=str(tmp_path / "train.xyz"), test_file=str(tmp_path / "test.xyz"), n_train=8,
                  n_val=4, methods=["none", "anids"], out_dir=str(tmp_path / "runs"), results_dir=str(tmp_path / "results"),
                  figures_dir=str(tmp_path / "fig"))
    _papermill(NBS / "rmd17.ipynb", tmp_path / "out.ipynb", params)
    top, recs = read_runs(tmp_path / "results" / "rmd17_ethanol_cpu.json", "rmd17")
    assert [(r["method"], r["seed"]) for r in recs] == [("none", 0), ("anids", 0), ("none", 1), ("anids", 1)]
    assert all(r["n_train"] == 8 and r["n_val"] == 4 and r["n_test"] == 12 and r["force_mae_meV_A"] > 0 for r in recs)
    assert top["recipe"] == "rmd17-cpu" and top["preset"] == "tiny" and top["threads"] == 1 and "train.xyz" in top["dataset"]
    assert top["budget"] == "cpu" and "(cpu budget)" in top["description"]
    assert (tmp_path / "fig" / "rmd17_ethanol_cpu.png").stat().st_size > 5000
    text = _outputs(tmp_path / "out.ipynb")
    assert "has no ethanol column" in text and "EquiformerV2 + AniDS (Ours)" in text and "no denoising" in text
    section = rmd17_section(tmp_path / "results")    # ethanol is not a column of Table 6: its own table in the section
    assert section.status == "measured" and any("ethanol" in t.columns for t in section.extra.values())


def test_rmd17_notebook_paper_budget(tmp_path):
    """nbs/rmd17.ipynb, paper budget, on a hand-extracted rMD17 folder written here (EquiformerV2 at its tiny preset):
    the test set is the official test file; without the archive the notebook stops with what to download."""
    import numpy as np
    import papermill as pm
    import pytest
    from ase import units
    from anids.results.sections import read_runs
    frames = _ethanol_emt_frames(40)
    kcal = units.kcal / units.mol
    root = tmp_path / "cache" / "rmd17" / "rmd17"
    (root / "npz_data").mkdir(parents=True); (root / "splits").mkdir()
    np.savez(root / "npz_data" / "rmd17_ethanol.npz", nuclear_charges=frames[0].numbers, coords=np.array([a.positions for a in frames]),
             energies=np.array([a.get_potential_energy() / kcal for a in frames]), forces=np.array([a.get_forces() / kcal for a in frames]))
    np.savetxt(root / "splits" / "index_train_01.csv", np.arange(0, 30), fmt="%d")
    np.savetxt(root / "splits" / "index_test_01.csv", np.arange(30, 40), fmt="%d")
    params = dict(TINY, budget="paper", molecule="ethanol", data_dir=str(tmp_path / "cache"), n_train=6, n_val=3, seeds=[0],
                  methods=["none"], out_dir=str(tmp_path / "runs"), results_dir=str(tmp_path / "results"), figures_dir=str(tmp_path / "fig"))
    _papermill(NBS / "rmd17.ipynb", tmp_path / "out.ipynb", params)
    top, (rec,) = read_runs(tmp_path / "results" / "rmd17_ethanol_paper.json", "rmd17")
    assert top["recipe"] == "rmd17-paper" and top["backbone"] == "equiformer_v2" and rec["n_test"] == 10 and rec["n_train"] == 6
    assert "index_test_01.csv" in top["protocol"]
    with pytest.raises(pm.PapermillExecutionError, match="figshare.com/ndownloader/files/23950376"):
        _papermill(NBS / "rmd17.ipynb", tmp_path / "out2.ipynb", dict(params, molecule="aspirin", data_dir=str(tmp_path / "empty")))


def test_md22_notebook_cpu_budget(tmp_path):
    """nbs/md22.ipynb, cpu budget, on the shipped bundled aspirin: labelled as not MD22 in the results, the notebook and
    the report (its own row of Table 7's section)."""
    from anids.results.sections import read_runs
    from anids.report.build import md22_section
    dirs = dict(out_dir=str(tmp_path / "runs"), results_dir=str(tmp_path / "results"), figures_dir=str(tmp_path / "fig"))
    _papermill(NBS / "md22.ipynb", tmp_path / "out.ipynb", dict(TINY, budget="cpu", n_train=8, n_val=4, max_test=10, **dirs))
    top, recs = read_runs(tmp_path / "results" / "md22_aspirin-bundled_cpu.json", "md22")
    assert {r["method"] for r in recs} == {"none", "anids"} and all(r["n_test"] == 10 and r["n_train"] == 8 for r in recs)
    assert "not MD22" in recs[0]["molecule"] and "not MD22" in top["description"] and top["recipe"] == "md17-demo"
    assert "not comparable" in _outputs(tmp_path / "out.ipynb") and (tmp_path / "fig" / "md22_aspirin-bundled_cpu.png").is_file()
    section = md22_section(tmp_path / "results")
    assert section.status == "measured" and recs[0]["molecule"] in section.table.index and "AT--AT--CG--CG" in section.table.index


def test_md22_notebook_paper_budget(tmp_path):
    """nbs/md22.ipynb, paper budget, on an MD22-format file written here (Equiformer at its tiny preset): MD22's split
    sizes given explicitly, every other frame tested, a results file the report reads into the AT-AT-CG-CG row."""
    import numpy as np
    from ase import units
    from anids.results.sections import read_runs
    from anids.report.build import md22_section
    frames = _ethanol_emt_frames(30)
    kcal = units.kcal / units.mol
    (tmp_path / "cache" / "md22").mkdir(parents=True)
    np.savez(tmp_path / "cache" / "md22" / "md22_AT-AT-CG-CG.npz", z=frames[0].numbers, R=np.array([a.positions for a in frames]),
             E=np.array([a.get_potential_energy() / kcal for a in frames]), F=np.array([a.get_forces() / kcal for a in frames]))
    _papermill(NBS / "md22.ipynb", tmp_path / "out.ipynb", dict(TINY, budget="paper", data_dir=str(tmp_path / "cache"), n_train=8,
                                                                n_val=4, seeds=[0], methods=["none"], out_dir=str(tmp_path / "runs"),
                                                                results_dir=str(tmp_path / "results"), figures_dir=str(tmp_path / "fig")))
    top, (rec,) = read_runs(tmp_path / "results" / "md22_AT-AT-CG-CG_paper.json", "md22")
    assert top["recipe"] == "md17-paper" and top["backbone"] == "equiformer" and rec["n_test"] == 18 and top["budget"] == "paper"
    section = md22_section(tmp_path / "results")
    assert section.status == "measured" and list(section.table.index) == ["AT--AT--CG--CG"]
    assert section.table.shape[1] == 8 + 1 and section.table.iloc[0, -1].endswith("(n=1)")   # the paper's columns, then ours


# the experiment notebooks: every top-level notebook but the library's (numbered), the report and the viewer, which read
EXPERIMENTS = sorted(p for p in NBS.glob("*.ipynb") if not p.name[:2].isdigit() and p.name not in ("report.ipynb", "covariance_viewer.ipynb"))


def _cells(nb):
    cells = json.loads(nb.read_text())["cells"]
    params = "".join("".join(c["source"]) for c in cells if "parameters" in c.get("metadata", {}).get("tags", []))
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code" and "parameters" not in c.get("metadata", {}).get("tags", []))
    return params, code


@pytest.mark.parametrize("nb", EXPERIMENTS, ids=lambda p: p.stem)
def test_experiment_notebook_writes_shipped_results_only_as_reference(nb):
    """A run with other settings never overwrites the shipped results/ and figures/: each experiment notebook has the
    parameter `reference = False` and takes its folders from anids.results.output_dirs (results/local/ unless
    reference=True; nbs/experiments/01_protocols.ipynb tests it), and builds no path into results/ or figures/ itself."""
    import re
    params, code = _cells(nb)
    assert re.search(r"^reference = False\b", params, re.M), f"{nb.name}: no parameter reference = False"
    assert re.search(r"output_dirs\(reference, (results_dir, figures_dir|at\(results_dir\), at\(figures_dir\))\)", code), nb.name
    own = re.findall(r'root / "(?:results|figures)"(?!\) / "cache")|\(results_dir, "results"\)|"\.\./(?:results|figures)"', code)
    assert not own, f"{nb.name} makes its own path into the shipped folders: {own}"


@pytest.mark.parametrize("nb", EXPERIMENTS, ids=lambda p: p.stem)
def test_experiment_notebook_threads_default_to_one(nb):
    "On a machine with other work, a second thread per run gains little and competes with it: the default is 1 thread."
    import re
    params, _ = _cells(nb)
    threads = re.findall(r"^threads = (\S+)", params, re.M)
    assert threads in ([], ["1"]), f"{nb.name}: threads = {threads}"


def test_package_never_spins_threads():
    """`import anids` sets OMP_WAIT_POLICY=PASSIVE before torch loads its OpenMP runtime (waiting threads sleep instead of
    spinning against other processes), keeps a value the user set, and a run of the package imports torch only after."""
    code = ("import os, sys; import anids; assert 'torch' not in sys.modules; import anids.train, torch; "
            "print(os.environ.get('OMP_WAIT_POLICY'))")
    for given, expected in ((None, "PASSIVE"), ("ACTIVE", "ACTIVE")):
        env = {k: v for k, v in ENV.items() if k != "OMP_WAIT_POLICY"}
        if given: env["OMP_WAIT_POLICY"] = given
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
        assert res.returncode == 0 and res.stdout.split()[-1] == expected, res.stdout + res.stderr[-2000:]


def _string_constants(source: str) -> list[str]:
    "The string literals of a module or a notebook cell (IPython magics and shell lines left out)."
    import ast, warnings
    text = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning); warnings.simplefilter("ignore", DeprecationWarning)   # "\+" in a cell
        tree = ast.parse(text)
    # parts of a path are no paths: an f-string's pieces, the operands of +, what a path ends or starts with
    pieces = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    pieces |= {id(v) for n in ast.walk(tree) if isinstance(n, ast.BinOp) for v in (n.left, n.right)}
    pieces |= {id(v) for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") in ("endswith", "startswith")
               for v in n.args}
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in pieces]


def test_no_default_path_outside_the_repository():
    """The project stands alone: no notebook (parameters and code) and no module names a path outside the repository
    by default, as an absolute path of some machine or as a relative path that climbs out of it (a notebook's relative
    paths are taken from its folder); the third-party sets are entries of the download registry instead."""
    import re
    absolute = re.compile(r"^(/(?!dev/|proc/|tmp/|usr/|etc/)[A-Za-z_][\w.-]*/[\w./-]+|~/[\w./-]+)$")
    climbing = re.compile(r"^(\.\./)+[\w.-]")
    outside = []
    # a library notebook's exported cells (its tests make up paths of their own), every code cell of an experiment notebook
    sources = [(p, src, p.parent) for p in sorted(NBS.rglob("*.ipynb")) if ".ipynb_checkpoints" not in p.parts
               for c in json.loads(p.read_text())["cells"] if c["cell_type"] == "code" for src in ["".join(c["source"])]
               if not p.name[:2].isdigit() or src.lstrip().startswith("#| export")]
    sources += [(p, p.read_text(), ROOT) for p in sorted((ROOT / "anids").rglob("*.py"))]
    for path, src, base in sources:
        for s in _string_constants(src):
            first = s.split()[0] if s.split() else ""
            if absolute.match(first) or (climbing.match(first) and ROOT not in [*(base / first).resolve().parents, (base / first).resolve()]):
                outside.append(f"{path.relative_to(ROOT)}: {s!r}")
    assert not outside, "paths outside the repository:\n" + "\n".join(outside)
    shared = "/".join(("..", "shared"))   # spelled in pieces, so that this file does not name it either
    for p in [*NBS.rglob("*.ipynb"), *(ROOT / "anids").rglob("*.py"), ROOT / "README.md", ROOT / "GUIDE.md"]:
        assert shared not in p.read_text() and "/work/" not in p.read_text(), p


def test_third_party_sets_are_registry_entries():
    "The ethanol PBE set and the mlearn crystals have download entries with a sha256, a licence and a pinned source."
    from anids.data.downloads import DOWNLOADS, MLEARN_ELEMENTS
    keys = ["ethanol_pbe_train", "ethanol_pbe_test_md", "ethanol_pbe_isolated_atoms",
            *(f"mlearn_{e}_{s}" for e in MLEARN_ELEMENTS for s in ("training", "test"))]
    for k in keys:
        e = DOWNLOADS[k]
        assert len(e["sha256"]) == 64 and e["licence"] in ("MIT", "BSD-3-Clause") and e["url"].startswith("https://"), k
