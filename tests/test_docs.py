"""The sources that `bash .ci/docs` hands to Sphinx (docs/stage.py; no Sphinx needed here): every notebook and
every module of the package gets a page, nbdev's directives and front matter stay off the pages, and nbdev still
skips executing the experiment notebooks marked `skip_exec`."""
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("docs_stage", ROOT / "docs" / "stage.py")
stage = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(stage)


def test_staged_sources(tmp_path):
    stage.stage(tmp_path)
    nbs = sorted(p.relative_to(ROOT / "nbs").as_posix() for p in (ROOT / "nbs").rglob("*.ipynb"))
    assert sorted(p.relative_to(tmp_path / "nbs").as_posix() for p in (tmp_path / "nbs").rglob("*.ipynb")) == nbs
    modules = stage.discover_modules(ROOT / "anids")
    assert "anids.method.noise" in modules and "anids.train.loop" in modules and "anids.train" in modules
    assert sorted(p.stem for p in (tmp_path / "api").glob("*.rst")) == sorted(modules)
    noise = (tmp_path / "api" / "anids.method.noise.rst").read_text()
    assert ".. autodata:: anids.method.noise.NOISE_METHODS" in noise and ".. autoclass:: anids.method.noise.NoiseGenerator" in noise
    assert ":doc:`method/01_noise </nbs/method/01_noise>`" in noise
    index = (tmp_path / "index.md").read_text()
    assert index.startswith((ROOT / "README.md").read_text().splitlines()[0])
    guide = (tmp_path / "GUIDE.md").read_text()   # every notebook, linked to its page and its module's
    assert "[`method/01_noise`](nbs/method/01_noise.ipynb) | {py:mod}`anids.method.noise` |" in guide
    assert "[`train/05_fit`](nbs/train/05_fit.ipynb) | {py:mod}`anids.train.loop` |" in guide and "\nGUIDE\n" in index
    # the results: their index (RESULTS.md) in the table of contents, one page per study under results/ with its figures
    results = (tmp_path / "RESULTS.md").read_text()
    assert results.startswith((ROOT / "RESULTS.md").read_text().splitlines()[0])
    assert "](RESULTS.md)" in index and "\nRESULTS\n" in index and "](docs/results/" not in results
    pages = sorted(p.name for p in (ROOT / "docs" / "results").glob("*.md"))
    assert pages and sorted(p.name for p in (tmp_path / "results").glob("*.md")) == sorted(pages + ["report.md"])
    assert all(f"](results/{p})" in results and f"\nresults/{p[:-3]}\n" in results for p in pages)
    # the paper's tables (results/report.md) are a page of the site too, with their figures
    assert "](results/report.md)" in results and "\nresults/report\n" in results
    report = (tmp_path / "results" / "report.md").read_text()
    assert report == (ROOT / "results" / "report.md").read_text() and "](../figures/report_md17.png)" in report
    assert (tmp_path / "figures" / "report_md17.png").is_file()
    # the study pages live in docs/results/ of the repository, in results/ of the site: the index and the guide link there
    assert "](docs/results/" in (ROOT / "GUIDE.md").read_text() and "](docs/results/" not in guide
    assert "](results/crystals.md)" in guide and "](docs/results/" not in index
    # every relative link of every staged page leads to a staged page or file (Sphinx's myst.xref_missing otherwise)
    assert stage.dead_links(tmp_path) == []
    cpu = (tmp_path / "results" / "cpu-recipe-and-mace.md").read_text()
    assert "](../figures/compare_mace.png)" in cpu and (tmp_path / "figures" / "compare_mace.png").is_file()
    for name in nbs:
        cells = json.loads((tmp_path / "nbs" / name).read_text())["cells"]
        assert cells and all(c["cell_type"] != "raw" for c in cells), name
        for c in cells:
            src = c["source"]
            if c["cell_type"] == "code": assert not src.lstrip().startswith("#|"), (name, src[:80])
            else: assert not src.startswith("---"), (name, src[:80])
    md17 = json.loads((tmp_path / "nbs" / "md17_finetune.ipynb").read_text())["cells"]
    assert md17[0]["source"].startswith("# MD17 fine-tuning")


def test_dead_links_are_found(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "a.md").write_text("# A\n")
    (tmp_path / "index.md").write_text("[ok](results/a.md#a) [gone](docs/results/a.md) [web](https://example.org) "
                                       "[here](#top) ![fig](figures/x.png) [mail](mailto:a@b.c)\n")
    (tmp_path / "results" / "b.md").write_text("[up](../index.md) [lost](report.md)\n")
    assert stage.dead_links(tmp_path) == ["index.md: docs/results/a.md", "results/b.md: report.md"]


def test_a_missing_figure_is_an_error(tmp_path):
    # a page that shows a figure the repository lacks would render with a broken image: staging stops and names it
    import pytest
    with pytest.raises(FileNotFoundError, match="figures/nope.png"):
        stage.stage_figures(tmp_path, "text ![a plot](figures/nope.png) more")
    assert stage.stage_figures(tmp_path, "no figures here") == set()


def test_directives_and_hidden_cells():
    nb = {"cells": [{"cell_type": "code", "source": "#| default_exp x", "outputs": [], "metadata": {}},
                    {"cell_type": "code", "source": "#| hide\nsecret = 1", "outputs": [], "metadata": {}},
                    {"cell_type": "code", "source": "#| export\ndef f(): pass", "outputs": [], "metadata": {}},
                    {"cell_type": "raw", "source": "---\nskip_exec: true\n---", "metadata": {}},
                    {"cell_type": "markdown", "source": "| a | $|x|$ |\n|---|---|", "metadata": {}}]}
    cells = stage.clean_notebook(nb)["cells"]
    assert [c["source"] for c in cells] == ["def f(): pass", r"| a | $\vert x\vert $ |" + "\n|---|---|"]


def test_experiment_notebooks_are_not_executed_by_nbdev():
    from fastcore.nbio import nb_frontmatter, read_nb
    from nbdev.test import nb_test_cells
    for name in ("md17_finetune", "computational_cost", "rmd17", "md22", "geometry_optimisation", "md_stability"):
        path = ROOT / "nbs" / f"{name}.ipynb"
        nb = read_nb(path)
        assert nb.cells[0].cell_type == "raw" and nb_frontmatter(nb).get("skip_exec") is True
        assert nb_test_cells(path) == []


_store_spec = importlib.util.spec_from_file_location("docs_store_outputs", ROOT / "docs" / "store_outputs.py")
store = importlib.util.module_from_spec(_store_spec)
_store_spec.loader.exec_module(store)


def test_library_notebooks_show_their_outputs():
    # the docs site executes nothing, so a notebook shows what `docs/store_outputs.py` stored: most library notebooks
    # show their examples' outputs, and a stored output is already in its tidy form (no stderr, no path of the machine
    # that ran it, no echo of an exported cell), so the tool's --tidy would change nothing
    nbs = store.library_notebooks()
    assert len(nbs) > 50 and ROOT / "nbs" / "00_provenance.ipynb" in nbs
    shown = [p for p in nbs if any(c.get("outputs") for c in json.loads(p.read_text())["cells"])]
    assert len(shown) / len(nbs) >= 0.7, f"only {len(shown)} of {len(nbs)} library notebooks keep outputs"
    for p in shown:
        for c in json.loads(p.read_text())["cells"]:
            for out in c.get("outputs", []):
                kept = store.keep_output(out)
                assert kept == out, f"{p.relative_to(ROOT)}: an output --tidy would change or drop"
                assert not (store.is_exported(c) and out["output_type"] == "execute_result"), f"{p.relative_to(ROOT)}: an echo"
