"""Stage the sources of the documentation site for Sphinx (run by `.ci/docs`).

Writes into DEST (default `build/docs/src`):

* `index.md`: the README, with the notebook table linked to the notebook pages and the API pages;
* `RESULTS.md`: the index of what was measured, and `results/<study>.md`: one page per study (`docs/results/`, made
  from the results files by `anids.report.studies.write_study_pages`), `results/report.md` (the paper's tables with
  ours beside them), and `figures/`: the figures these pages show; links to `docs/results/` point to `results/`;
* `nbs/*.ipynb`: every notebook of `nbs/` with its stored content (nothing is executed): nbdev's directive lines
  (`#| export`, `#| default_exp`, ...) are stripped, cells marked `#| hide` are left out, as are cells left empty
  and front-matter cells (`---` blocks); `#| echo: false` drops a cell's source and `#| output: false` its outputs;
* `api/`: one page per module of the `anids` package (found in the package directory, not from a fixed list) and
  an index of them, each naming the notebook it is exported from.

A file is only rewritten when its content changes, so that Sphinx rebuilds only what changed.
"""
from __future__ import annotations

import ast
import json
import pkgutil
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "anids"
REPORT_PAGE = "report.md"   # results/report.md: the paper's tables with ours beside them
_DIRECTIVE = re.compile(r"^\s*#\|\s*([\w-]+)\s*:?\s*(.*?)\s*$")
_FRONT_MATTER = re.compile(r"^---\s*\n.*?\n---\s*$", re.S)


def write_if_changed(path: Path, text: str) -> bool:
    "Write `text` to `path` unless it already holds exactly that; True if written"
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_file() and path.read_text(encoding="utf-8") == text: return False
    path.write_text(text, encoding="utf-8")
    return True


def _source(cell) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def split_directives(src: str) -> tuple[dict, str]:
    "nbdev's directives at the top of a code cell (`#| name: value`) and the source without them"
    lines, directives = src.splitlines(), {}
    i = 0
    while i < len(lines):
        m = _DIRECTIVE.match(lines[i])
        if m: directives[m.group(1).replace("-", "_")] = m.group(2)
        elif lines[i].strip(): break
        i += 1
    return directives, "\n".join(lines[i:]).strip("\n")


def _false(v: str) -> bool: return v.strip().lower() in ("false", "0", "no")


def _table_math(md: str) -> str:
    "In the rows of a markdown table, `|` inside `$...$` is LaTeX (as Jupyter reads it), not a cell border"
    def row(line):
        if not line.lstrip().startswith("|"): return line
        return re.sub(r"\$[^$]+\$", lambda m: m.group(0).replace(r"\|", r"\Vert ").replace("|", r"\vert "), line)
    return "\n".join(row(l) for l in md.split("\n"))


def clean_notebook(nb: dict) -> dict:
    "The notebook as the site shows it: stored content, no nbdev directives, no hidden or empty cells"
    cells = []
    for cell in nb["cells"]:
        src = _source(cell)
        if cell["cell_type"] == "raw":
            continue  # front matter (e.g. nbdev's `skip_exec`) or output for other formats: not page content
        if cell["cell_type"] == "markdown":
            if not src.strip() or _FRONT_MATTER.match(src.strip()): continue
            cells.append(dict(cell, source=_table_math(src)))
            continue
        directives, code = split_directives(src)
        if "hide" in directives: continue
        outputs = cell.get("outputs", [])
        if _false(directives.get("output", "true")): outputs = []
        if _false(directives.get("echo", "true")): code = ""
        if not code.strip() and not outputs: continue
        c = dict(cell, source=code, outputs=outputs)
        if not code.strip():
            c["metadata"] = dict(c.get("metadata", {}), tags=list(c.get("metadata", {}).get("tags", [])) + ["remove-input"])
        cells.append(c)
    return dict(nb, cells=cells)


def notebook_title(nb: dict) -> str:
    "The first `# heading` of a notebook"
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            m = re.search(r"^#\s+(.+?)\s*$", _source(cell), re.M)
            if m: return m.group(1)
    return ""


def notebook_module(nb: dict) -> str | None:
    "The module a notebook exports to (`#| default_exp name`), as a dotted name"
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            d, _ = split_directives(_source(cell))
            if "default_exp" in d: return f"{PACKAGE}.{d['default_exp'].split()[0]}"
    return None


def discover_modules(pkg_dir: Path, prefix: str = PACKAGE) -> list[str]:
    "Public modules of the package in `pkg_dir` (names starting with `_` are private), subpackages included"
    out = []
    for info in sorted(pkgutil.iter_modules([str(pkg_dir)]), key=lambda i: i.name):
        if info.name.startswith("_"): continue
        name = f"{prefix}.{info.name}"
        out.append(name)
        if info.ispkg: out += discover_modules(pkg_dir / info.name, name)
    return out


def _rst_math(s: str) -> str: return re.sub(r"\$([^$]+)\$", r":math:`\1`", s)


def public_api(path: Path) -> list[tuple[str, str, bool]]:
    """(name, kind, short) for each name of a module's `__all__`, in that order, read from its source (no import):
    kind is `function`, `class` or `data`; `short` says whether a data value is short enough to show"""
    src = path.read_text(encoding="utf-8")
    tree, kinds, names = ast.parse(src), {}, None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)): kinds[node.name] = ("function", True)
        elif isinstance(node, ast.ClassDef): kinds[node.name] = ("class", True)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                for t in (target.elts if isinstance(target, ast.Tuple) else [target]):
                    if not isinstance(t, ast.Name): continue
                    if t.id == "__all__": names = list(ast.literal_eval(node.value))
                    else: kinds.setdefault(t.id, ("data", len(ast.get_source_segment(src, node.value) or "") <= 160))
    if names is None: names = [n for n in kinds if not n.startswith("_")]
    return [(n, *kinds.get(n, ("data", False))) for n in names]


def module_page(mod: str, path: Path, nb: str | None, title: str) -> str:
    "The reStructuredText of one module's API page"
    lines = [mod, "=" * len(mod), ""]
    if nb:
        lines += [f"Exported from the notebook :doc:`{nb} </nbs/{nb}>`" + (f": {_rst_math(title)}." if title else "."),
                  "The notebook is the source: it explains and tests what is documented here.", ""]
    lines += [f".. py:module:: {mod}", ""]
    for name, kind, short in public_api(path):
        lines += [f".. auto{kind}:: {mod}.{name}"] + (["   :no-value:"] if kind == "data" and not short else []) + [""]
    return "\n".join(lines)


def stage_api(dest: Path, modules: list[str], nb_of: dict[str, tuple[str, str]]) -> None:
    rows = ["| module | notebook | what |", "|---|---|---|"]
    for mod in modules:
        nb, title = nb_of.get(mod, (None, ""))
        rows.append(f"| {{py:mod}}`{mod}` | " + (f"[{nb}](../nbs/{nb}.ipynb)" if nb else "") + f" | {title} |")
        path = ROOT.joinpath(*mod.split("."))
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        write_if_changed(dest / "api" / f"{mod}.rst", module_page(mod, path, nb, title))
    toctree = ["```{toctree}", ":hidden:", ""] + modules + ["```", ""]
    text = "\n".join(["# API reference", "",
                      f"The public API of the `{PACKAGE}` package: each module's `__all__`, with signatures, docstrings and the",
                      "comments beside each parameter. The modules are exported from the library notebooks by `nbdev_export`.", "",
                      *rows, "", *toctree])
    write_if_changed(dest / "api" / "index.md", text)


def stage_index(dest: Path, lib_nbs: list[str], exp_nbs: list[str], nb_names: set[str], modules: set[str]) -> set[Path]:
    text = _table_math((ROOT / "README.md").read_text(encoding="utf-8"))

    def link_row(m):  # a row of the README's notebook table: link the notebook and the module
        nb, mod = m.group(1), m.group(2)
        if nb not in nb_names: return m.group(0)
        mod_cell = f"{{py:mod}}`{mod}`" if mod in modules else f"`{mod}`"
        return f"| [`{nb}`](nbs/{nb}.ipynb) | {mod_cell} |"
    def link_tables(text):
        text = re.sub(r"^\| `([\w./-]+)` \| `([\w.]+)` \|", link_row, text, flags=re.M)
        return re.sub(r"^\| `([\w./-]+)` \| (—|-) \|",
                      lambda m: f"| [`{m.group(1)}`](nbs/{m.group(1)}.ipynb) | {m.group(2)} |" if m.group(1) in nb_names else m.group(0),
                      text, flags=re.M)
    text = link_tables(text)
    # the user guide: what the README leaves out, with the notebook table linked the same way
    # the study pages sit in docs/results/ of the repository and in results/ of the site
    site_links = lambda md: md.replace("](README.md", "](index.md").replace("](docs/results/", "](results/")
    write_if_changed(dest / "GUIDE.md", site_links(link_tables(_table_math((ROOT / "GUIDE.md").read_text(encoding="utf-8")))))
    toc = lambda caption, entries: ["", "```{toctree}", ":hidden:", f":caption: {caption}", "", *entries, "```"]
    text = text.rstrip("\n") + "\n" + "\n".join(
        toc("Library notebooks", [f"nbs/{n}" for n in lib_nbs]) + toc("Experiment notebooks", [f"nbs/{n}" for n in exp_nbs])
        + toc("Guide and results", ["GUIDE", "RESULTS", "CHANGELOG"]) + toc("API", ["api/index"])) + "\n"
    write_if_changed(dest / "index.md", site_links(text))
    # the index of the results (RESULTS.md), one page per study beside it in results/ (docs/results/ in the repository)
    # and the paper's tables with ours (results/report.md, made by nbs/report.ipynb) beside them, at the same path
    results = site_links(_table_math((ROOT / "RESULTS.md").read_text(encoding="utf-8")))
    pages = sorted((ROOT / "docs" / "results").glob("*.md"))
    report = ROOT / "results" / REPORT_PAGE
    if report.stem in {p.stem for p in pages}: raise ValueError(f"a study page is named {REPORT_PAGE}, as the report is")
    results = results.rstrip("\n") + "\n" + "\n".join(toc("Studies", [f"results/{p.stem}" for p in pages] + [f"results/{report.stem}"])) + "\n"
    write_if_changed(dest / "RESULTS.md", results)
    shown = text + results
    for page in pages:   # figures are linked relative to the page: ../../figures in the repository, ../figures here
        body = _table_math(page.read_text(encoding="utf-8")).replace("](../../figures/", "](../figures/")
        write_if_changed(dest / "results" / page.name, body)
        shown += body.replace("](../figures/", "](figures/")
    body = _table_math(report.read_text(encoding="utf-8"))   # ../figures/ from results/, in the repository as here
    write_if_changed(dest / "results" / report.name, body)
    shown += body.replace("](../figures/", "](figures/")
    write_if_changed(dest / "CHANGELOG.md", (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"))
    return stage_figures(dest, shown) | {dest / "results" / p.name for p in pages} | {dest / "results" / report.name}


def stage_figures(dest: Path, markdown: str) -> set[Path]:
    "The repository's figures that `markdown` shows (`![...](figures/...)`), copied beside the pages; their paths"
    out = set()
    for rel in sorted(set(re.findall(r"!\[[^\]]*\]\((figures/[^)\s]+)\)", markdown))):
        src, target = ROOT / rel, dest / rel
        if not src.is_file(): raise FileNotFoundError(f"a page shows {rel}, which does not exist")
        if not target.is_file() or target.read_bytes() != src.read_bytes():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(src.read_bytes())
        out.add(target)
    return out


_LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def dead_links(dest: Path) -> list[str]:
    """`page: target` for each relative link of the staged markdown pages whose target is not staged (Sphinx would
    render it as text that leads nowhere); links to the web and to anchors of the same page are not checked here"""
    out = []
    for page in sorted(dest.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        for target in _LINK.findall(text):
            if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"): continue
            path = target.split("#", 1)[0]
            if not (page.parent / path).exists(): out.append(f"{page.relative_to(dest).as_posix()}: {target}")
    return out


def stage(dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    # the library notebooks sit in a folder per layer (nbs/method/01_noise.ipynb); a notebook's name is its path there
    nbs = sorted((ROOT / "nbs").rglob("*.ipynb"))
    nb_of, names, staged = {}, [], set()
    for path in nbs:
        name = path.relative_to(ROOT / "nbs").with_suffix("").as_posix()
        nb = json.loads(path.read_text(encoding="utf-8"))
        mod = notebook_module(nb)
        if mod: nb_of[mod.removesuffix(".__init__")] = (name, notebook_title(nb))
        names.append(name)
        target = dest / "nbs" / f"{name}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        write_if_changed(target, json.dumps(clean_notebook(nb), indent=1, ensure_ascii=False) + "\n")
        staged.add(target)
    lib = [n for n in names if re.match(r"\d\d_", n.rsplit("/", 1)[-1])]
    # in the order of their notebooks (00_provenance, then the layers' folders), modules without one after them
    modules = sorted(discover_modules(ROOT / PACKAGE), key=lambda m: (nb_of.get(m, ("~",))[0], m))
    stage_api(dest, modules, nb_of)
    figures = stage_index(dest, lib, [n for n in names if n not in lib], set(names), set(modules))
    # sources of an earlier build that are gone now (a renamed notebook or module)
    keep = {dest / "index.md", dest / "GUIDE.md", dest / "RESULTS.md", dest / "CHANGELOG.md", dest / "api" / "index.md"} | staged \
        | {dest / "api" / f"{m}.rst" for m in modules} | figures
    for f in list(dest.rglob("*")):
        if f.is_file() and f not in keep: f.unlink()


if __name__ == "__main__":
    stage(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "build" / "docs" / "src")
