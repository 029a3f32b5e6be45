"""The notebooks are the source of truth: each library notebook runs (its test cells included), `nbdev_export`
reproduces `anids/` exactly, and the experiment notebooks run end to end with small settings (papermill)."""
import filecmp, json, os, shutil, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
LIBRARY = sorted(NBS.glob("[0-9][0-9]*_*.ipynb"))   # 00_*, 01a_*, ... in reading order
ENV = dict(os.environ, OMP_NUM_THREADS="2", PYTHONUNBUFFERED="1", MPLBACKEND="Agg")


def test_there_are_library_notebooks():
    assert len(LIBRARY) >= 9, [p.name for p in LIBRARY]


@pytest.mark.parametrize("nb", LIBRARY, ids=lambda p: p.stem)
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
    assert r["molecule"] == "ethanol" and r["method"] == "anids" and r["dataset"] == "bundled"
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
    from anids.report import PAPER_TABLES, RUN_SCHEMAS
    from anids.units import force_factor
    out = tmp_path / "rep" / "report.md"
    _papermill(NBS / "report.ipynb", tmp_path / "out.ipynb",
               dict(results_dir=str(ROOT / "results"), figures_dir=str(tmp_path / "fig"), out=str(out)))
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
