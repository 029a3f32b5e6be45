"""The README's Python API example runs as written."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_python_api(tmp_path, monkeypatch):
    text = (ROOT / "README.md").read_text()
    section = text.split("## Python API", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert len(code.strip().splitlines()) <= 20
    monkeypatch.chdir(tmp_path)
    g = {}
    exec(compile(code, "README.md", "exec"), g)
    import numpy as np, torch
    atoms, pred, cov = g["atoms"], g["pred"], g["cov"]
    n = len(atoms)
    assert pred.energy.shape == (1,) and pred.forces.shape == (n, 3) and torch.isfinite(pred.forces).all()
    assert cov.matrix.shape == (n, 3, 3) and bool((torch.linalg.eigvalsh(cov.matrix) > 0).all())
    # the reloaded model behind the ASE calculator gives what the model gave before saving
    assert np.isclose(atoms.get_potential_energy(), float(pred.energy[0].detach()), rtol=1e-5, atol=1e-5)
    assert np.allclose(atoms.get_forces(), pred.forces.detach().numpy(), atol=1e-5)
    assert (tmp_path / "model.pt").is_file()


def test_readme_commands_match_ci():
    text = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    test_cmd = [l for l in text.splitlines() if l.rstrip().endswith("&& pytest")]
    assert len(test_cmd) == 1
    assert test_cmd[0].strip() in ci.splitlines(), "the CI must run the README's test command"


def test_readme_headline_is_the_results():
    "The README's headline table is what anids.report.build.headline_table makes of results/ today."
    import re as _re
    from anids.report.build import headline_table
    text = (ROOT / "README.md").read_text()
    block = _re.search(r"<!-- headline: [^\n]*-->\n(.*?)\n<!-- /headline -->", text, _re.S)
    assert block, "the README has no headline block"
    assert block.group(1) == headline_table(ROOT / "results", ROOT / "data" / "checkpoints"), \
        "README.md's headline differs from results/: paste anids.report.build.headline_table('results') into it"


def test_readme_is_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 150


def test_readme_says_how_to_get_the_cpu_torch():
    """On Linux the PyPI pin is torch's CUDA build (several GB): the README says so and gives the CPU build's command, at
    the version the CI pins, so that the commands' own `pip install torch==<pin>` finds it installed."""
    import re as _re
    text = " ".join((ROOT / "README.md").read_text().split())
    (pin,) = set(_re.findall(r"pip install torch==([\w.]+) &&", (ROOT / ".ci" / "run").read_text()))
    assert f"`pip install torch=={pin} --index-url https://download.pytorch.org/whl/cpu`" in text
    assert "CUDA build" in text and f"`{pin}+cpu` satisfies the pin" in text
