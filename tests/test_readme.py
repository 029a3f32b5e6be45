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
    exec(compile(code, "README.md", "exec"), {})
    assert (tmp_path / "model.pt").is_file()


def test_readme_commands_match_ci():
    text = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    test_cmd = [l for l in text.splitlines() if l.rstrip().endswith("&& pytest")]
    assert len(test_cmd) == 1
    assert test_cmd[0].strip() in ci.splitlines(), "the CI must run the README's test command"
