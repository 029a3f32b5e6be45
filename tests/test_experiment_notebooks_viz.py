"""The covariance viewer and the case-study notebooks run end to end offline with small settings (papermill),
and write what they promise: a standalone HTML page and a PNG; results/case_study.json and
results/physical_covariance.json with their keys; the figures."""
import json
import re
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
CHECKPOINTS = ROOT / "data" / "checkpoints"


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")


def _papermill(nb, out, params):
    import papermill as pm
    return pm.execute_notebook(str(nb), str(out), parameters=params, kernel_name="python3", cwd=str(NBS),
                               progress_bar=False)


def test_notebooks_extra_is_enough():
    """`pip install -e ".[notebooks]"` runs every notebook and nbdev_export: it holds nbdev, the viewer's and the report's
    packages, and all that the data, pre-training and materials extras bring (RDKit and tblite for the named molecules,
    PySCF, qm9pack, lmdb)."""
    try: import tomllib
    except ModuleNotFoundError: import tomli as tomllib
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    name = lambda req: re.match(r"[A-Za-z0-9_.-]+", req).group(0).lower().replace("_", "-")
    notebooks = {name(r) for r in extras["notebooks"]}
    assert {"nbdev", "papermill", "py3dmol", "jupyterlab", "rdkit", "tblite", "pandas"} <= notebooks
    assert {name(r) for k in ("data", "pretrain", "materials") for r in extras[k]} <= notebooks


def test_checkpoints_are_small_and_documented():
    for method in ("anids", "denoisevae"):
        ck = CHECKPOINTS / f"pretrain_painn_demo_{method}.pt"
        assert ck.is_file() and ck.stat().st_size < 2_000_000
        prov = json.loads(ck.with_suffix(".json").read_text())
        assert prov["config"]["method"] == method and prov["config"]["scheme"] == "pretrain"
        assert prov["data"]["n_structures"] > 100 and {"H", "N", "P", "S", "O", "Pd"} <= set(prov["data"]["elements"])
        assert prov["sha256"] and "make_case_study_checkpoints" in prov["reproduce"]


def _calls(page, name):   # the view's own commands (an embedded 3Dmol.js holds these names too)
    return len(re.findall(rf"viewer_\d+\.{name}\(", page))


def test_covariance_viewer_molecule_with_default_checkpoint(tmp_path):
    html, png = tmp_path / "fig" / "eth.html", tmp_path / "fig" / "eth.png"
    out = _papermill(NBS / "covariance_viewer.ipynb", tmp_path / "out.ipynb",
                     dict(structure="ethanol", optimise=False, atoms=["C", "O"], arrows="all", html=str(html), png=str(png)))
    page = html.read_text()
    assert page.startswith("<html>") and _calls(page, "addCustom") == 3 and _calls(page, "addArrow") == 3 * 6
    assert "setHoverable" in page and "pretrain_painn_demo_anids.pt" in page
    assert png.stat().st_size > 10_000
    # the run says where the page takes 3Dmol.js from; the page frames the structure and says so where it cannot load
    printed = "".join("".join(o.get("text", "")) for c in out["cells"] for o in c.get("outputs", []))
    assert "3Dmol.js: embedded from" in printed or "3Dmol.js: loaded from https://" in printed
    assert 'zoomTo({"model": 1})' in page and _calls(page, "zoom") == 1 and 'id="anids3dmolmessage_' in page


def test_covariance_viewer_offline_page(tmp_path):
    """With js_file the page embeds the given 3Dmol.js and never names the CDN."""
    html, js = tmp_path / "w.html", tmp_path / "3Dmol-min.js"
    js.write_text("window.$3Dmol = {marker: 'local copy'};")
    _papermill(NBS / "covariance_viewer.ipynb", tmp_path / "out.ipynb",
               dict(structure="H2O", checkpoint=None, html=str(html), png=str(tmp_path / "w.png"), js_file=str(js)))
    page = html.read_text()
    assert "local copy" in page and page.index("local copy") < page.index("Promise.resolve()") < page.index("typeof $3Dmolpromise")
    assert _calls(page, "addCustom") == 3 and "http" not in page
    assert "Starting the 3D view (3Dmol.js embedded from 3Dmol-min.js)" in page   # shown until the viewer runs


def test_covariance_viewer_crystal_untrained_with_images(tmp_path):
    html, png = tmp_path / "pdo.html", tmp_path / "pdo.png"
    _papermill(NBS / "covariance_viewer.ipynb", tmp_path / "out.ipynb",
               dict(structure="pdo", checkpoint=None, images=True, arrows=False, html=str(html), png=str(png), js_file=None))
    page = html.read_text()
    assert _calls(page, "addCylinder") == 12 and _calls(page, "addCustom") > 18 and "untrained generator" in page
    # without a local 3Dmol.js (js_file=None) the page loads the CDN copy and, until it has, shows what to do
    assert re.search(r"loadScriptAsync\('https://cdn\.jsdelivr\.net/npm/3dmol@[\d.]+/build/3Dmol-min\.js'\)", page)
    message = re.search(r'<div id="anids3dmolmessage_\d+"[^>]*>([^<]*)</div>', page).group(1)
    assert "If this message stays" in message and "fetch_3dmol_js()" in message and "ANIDS_3DMOL_JS" in message
    assert png.is_file()


def test_case_study_small(tmp_path):
    res, fig = tmp_path / "results", tmp_path / "fig"
    params = dict(crystal_calc="emt", relax_crystal=False, crystal_atoms=[0, 2, 16], n_samples=2,
                  physical_train=["ethanol"], physical_held_out=["snph4"], physical_crystal=True, n_random=4,
                  results_dir=str(res), figures_dir=str(fig))
    _papermill(NBS / "case_study.ipynb", tmp_path / "out.ipynb", params)
    cs = json.loads((res / "case_study.json").read_text())
    assert cs["snph4"]["formula"] == "H4NPS" and len(cs["snph4"]["probe"]["smape_percent"]) == 7
    assert {"spearman_direction", "spearman_atom", "stiffest_match_fraction"} <= set(cs["snph4"]["summary"])
    assert len(cs["snph4"]["p_h_alignment"]) == 2
    assert cs["crystal"]["formula"] == "H2O8Pd8" and len(cs["crystal"]["o_o_alignment"]) == 4
    assert 0 <= cs["crystal"]["o_o_cos_smallest_mean"] <= 1 and cs["crystal"]["probe"]["indices"] == [0, 2, 16]
    assert len(cs["crystal"]["o_o_alignment_physical"]) == 4 and 0 <= cs["crystal"]["o_o_cos"]["physical"] <= 1
    assert cs["crystal"]["hessian"]["n_rigid_modes"] == 3 and cs["settings"]["probe_calc"] == "gfn2"
    change = cs["crystal"]["structure_change"]                 # not relaxed: the ideal lattice, Pd four-fold
    assert change["max_displacement_A"] == 0 and change["Pd_O_coordination"] == [4] * 8
    assert cs["crystal"]["o_o_cos"]["anids_ideal_lattice"] == cs["crystal"]["o_o_cos"]["anids"]   # same structure
    assert cs["versions"]["torch"] and "sMAPE" in cs["smape_definition"]
    # the "reading" cell quotes this run's numbers, not numbers typed into the prose
    assert f"{cs['snph4']['summary']['spearman_direction']:.2f}" in cs["reading"] and "untrained generator's" in cs["reading"]
    phys = json.loads((res / "physical_covariance.json").read_text())
    assert set(phys["summary"]) == {"anids", "denoisevae", "anids_qm9", "denoisevae_qm9", "anids_untrained", "random_orientation"}
    assert phys["checkpoints"]["anids_qm9"].endswith("pretrain_qm9_painn_demo_anids.pt")
    assert set(phys["summary"]["anids"]) == {"train_molecules", "held_out_molecules", "crystals"}
    for key in ("stiff_cos_mean", "trace_spearman", "shape_distance_mean"):
        assert phys["summary"]["anids"]["held_out_molecules"][key] is not None
    assert phys["summary"]["denoisevae"]["train_molecules"]["stiff_cos_mean"] is None   # isotropic: undefined
    assert [s["name"] for s in phys["structures"]] == ["ethanol", "snph4", "PdO+2OH"]
    assert phys["structures"][2]["hessian"]["n_rigid_modes"] == 3 and "definitions" in phys
    for name in ("case_study_snph4_probe.png", "case_study_crystal_probe.png", "physical_covariance.png",
                 "case_study_snph4.html", "case_study_crystal.html"):
        assert (fig / name).is_file(), name
