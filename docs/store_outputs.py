"""Run library notebooks and keep their outputs, so that the examples on real molecules show their tables, prints and
figures in JupyterLab and on the documentation site (which executes nothing: `docs/stage.py`).

    python docs/store_outputs.py                     # every library notebook (nbs/<layer>/*.ipynb)
    python docs/store_outputs.py nbs/method/*.ipynb  # some of them

Each notebook runs as its tests do (`nbdev.test.test_nb`, from its own folder) and is written back with its outputs,
then cleaned as nbdev cleans it (`nbdev_clean`: no execution counts or run metadata; outputs stay). What a reader
should not see is left out (`keep_output`): warnings and other stderr, and any output bigger than `MAX_OUTPUT_BYTES`
but its picture or its text; paths of this machine become paths relative to the repository. A notebook whose run fails
is left as it was and named; the command then exits with 1. The sizes are printed, so the repository stays light.

    python docs/store_outputs.py --tidy               # only tidy the stored outputs again (no run)
"""
from __future__ import annotations
import sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("data", "nn", "method", "train", "analysis", "results", "experiments", "report")


MAX_OUTPUT_BYTES = 200_000


def keep_output(out: dict) -> dict | None:
    "The stored form of one output, or None to leave it out."
    import json
    if out.get("output_type") == "stream" and out.get("name") == "stderr": return None
    text = json.dumps(out)
    if len(text) > MAX_OUTPUT_BYTES and "data" in out:
        small = {k: v for k, v in out["data"].items() if k in ("image/png", "text/plain")}
        if len(json.dumps(small)) > MAX_OUTPUT_BYTES: small = {k: v for k, v in small.items() if k == "text/plain"}
        out = {**out, "data": small}
    text = json.dumps(out).replace(str(ROOT) + "/", "").replace(str(ROOT), ".")
    return json.loads(text)


def is_exported(cell: dict) -> bool:
    "Whether `nbdev_export` takes the cell into the package (its outputs are only the echo of its last line)."
    return "".join(cell["source"]).lstrip().startswith(("#| export", "#|export"))


def tidy(path: Path) -> None:
    """Apply `keep_output` to every stored output of the notebook at `path`, and drop the echo of an exported cell (a
    module's or a constant's docstring, which the page shows as the cell's code already)."""
    import json
    nb = json.loads(path.read_text())
    for c in nb["cells"]:
        if not c.get("outputs"): continue
        c["outputs"] = [o for o in map(keep_output, c["outputs"])
                        if o is not None and not (is_exported(c) and o.get("output_type") == "execute_result")]
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


def library_notebooks() -> list[Path]:
    "The notebooks `nbdev_export` makes the package from: one folder per layer, and the top-level modules' notebooks."
    top = [p for p in (ROOT / "nbs").glob("*.ipynb") if "#| default_exp" in p.read_text()]
    return sorted(top + [p for layer in LAYERS for p in (ROOT / "nbs" / layer).glob("*.ipynb")])


def main(argv: list[str]) -> int:
    import os
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from nbdev.test import test_nb
    from nbdev.clean import nbdev_clean
    only_tidy = "--tidy" in argv
    paths = [Path(a).resolve() for a in argv if a != "--tidy"] or library_notebooks()
    failed = []
    for p in paths:
        if only_tidy:
            tidy(p); nbdev_clean(fname=str(p)); continue
        before, t0 = p.read_bytes(), time.time()
        ok, _ = test_nb(p, save=True)
        if not ok:
            p.write_bytes(before)
            failed.append(p)
        else:
            tidy(p)
        print(f"{p.relative_to(ROOT)}: {'ok' if ok else 'FAILED (left as it was)'}, {time.time() - t0:.0f} s, "
              f"{len(before) / 1024:.0f} -> {p.stat().st_size / 1024:.0f} KiB", flush=True)
    for p in paths: nbdev_clean(fname=str(p))
    if failed: print("failed:", ", ".join(str(p.relative_to(ROOT)) for p in failed))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
