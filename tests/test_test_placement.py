"""Every test cell of a library notebook sits directly after what it tests: between the newest exported cell it depends
on and the test itself there is no other exported cell. A test depends on an exported cell when it uses a name that cell
defines (a function, a class, a constant, or a method of one of its classes), or uses a variable of an earlier cell
that does. Exported cells that only import are nobody's subject. This reads the notebooks; it runs nothing."""
import ast
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXPORT = re.compile(r"\s*#\|\s*export")


def _tree(source: str):
    "The cell's syntax tree, magics and shell lines left out; None where it is not Python."
    try:
        return ast.parse("\n".join(l for l in source.splitlines() if not l.lstrip().startswith(("%", "!"))))
    except SyntaxError:
        return None


def _uses_and_binds(tree) -> tuple[set, set]:
    used, bound = set(), set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Load): used.add(n.attr)
        elif isinstance(n, ast.Name): (bound if isinstance(n.ctx, ast.Store) else used).add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)): bound.add(n.name)
        elif isinstance(n, ast.alias): bound.add((n.asname or n.name).split(".")[0])
    return used, bound


def _patched_class(n) -> str|None:
    "The class a `@patch`ed function is attached to (fastcore: the annotation of its first argument), else None."
    patched = any(isinstance(d, ast.Name) and d.id == "patch" or isinstance(d, ast.Call) and getattr(d.func, "id", None) == "patch"
                  for d in n.decorator_list)
    ann = n.args.args[0].annotation if patched and n.args.args else None
    return ann.id if isinstance(ann, ast.Name) else ann.value if isinstance(ann, ast.Constant) else None


def _exported_names(tree) -> set:
    "Top-level definitions of an exported cell, with the methods of its classes; empty for a cell that only imports."
    names = set()
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)): names.add(n.name)
        elif isinstance(n, ast.ClassDef):
            names.add(n.name)
            names |= {m.name for m in n.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))
                      and not m.name.startswith("__")}
        elif isinstance(n, ast.Assign): names |= {t.id for t in n.targets if isinstance(t, ast.Name)}
        elif isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name): names.add(n.target.id)
    return names


def misplaced_tests(cells: list[dict]) -> list[tuple[int, int, list[int]]]:
    """(test cell, the exported cell it depends on last, the exported cells between them) for each test cell (a code
    cell with an `assert` or a `raises`) that does not follow its subject directly."""
    source_of = {}       # name -> index of the exported cell it comes from (for a test's variables: what they depend on)
    class_cell = {}      # class name -> the exported cell that defines it
    continues = {}       # exported cell of @patch methods only -> the cell of the class they complete (one definition)
    exported, out = [], []
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code": continue
        src = "".join(cell["source"])
        tree = _tree(src)
        if tree is None: continue
        used, bound = _uses_and_binds(tree)
        depends = max([source_of[u] for u in used - bound if u in source_of], default=-1)
        if EXPORT.match(src):
            exported.append(i)
            for name in _exported_names(tree): source_of[name] = i
            class_cell |= {n.name: i for n in tree.body if isinstance(n, ast.ClassDef)}
            funcs = [n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom, ast.Expr))]
            owners = {class_cell.get(_patched_class(n)) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
                      for n in funcs}
            if funcs and len(owners) == 1 and None not in owners: continues[i] = owners.pop()
            continue
        for name in bound: source_of[name] = depends
        if depends >= 0 and ("assert" in src or "raises" in src):
            between = [e for e in exported if depends < e < i and continues.get(e) != depends]
            if between: out.append((i, depends, between))
    return out


def _cell(src, kind="code"):
    return {"cell_type": kind, "source": src.splitlines(keepends=True)}


def test_the_check_finds_a_test_after_unrelated_code():
    cells = [_cell("#| export\nimport math"),
             _cell("#| export\ndef area(r): return math.pi * r * r"),
             _cell("#| export\nclass Box:\n    def volume(self): return 1.0"),
             _cell("assert area(1) == math.pi"),                     # after Box, which it does not use: misplaced
             _cell("b = Box()"),
             _cell("#| export\nTWO = 2"),
             _cell("assert b.volume() == 1.0"),                      # through the variable b: depends on Box, misplaced
             _cell("assert TWO == 2 and Box().volume() == 1.0"),     # right after TWO: in place
             _cell("import math\nassert math.pi > 3")]               # tests nothing of the notebook's: no subject
    assert misplaced_tests(cells) == [(3, 1, [2]), (6, 2, [5])]
    assert misplaced_tests([cells[0], cells[1], cells[3], cells[2]]) == []   # moved up, beside area
    # methods attached with @patch complete their class's cell: between a class and its test only its methods may come
    box = _cell("#| export\nclass Box:\n    def __init__(self): pass")
    area = _cell("#| export\n@patch(as_prop=True)\ndef area(self: Box): return 6.0")
    volume = _cell("#| export\n@patch\ndef volume(self: Box): return 1.0")
    two, uses_box = _cell("#| export\nTWO = 2"), _cell("assert Box() is not None")
    assert misplaced_tests([box, area, volume, uses_box]) == []               # after the class's methods: in place
    assert misplaced_tests([box, area, two, uses_box]) == [(3, 0, [2])]       # something else in between: misplaced
    assert misplaced_tests([box, area, volume, _cell("assert Box().area == 6.0")]) == [(3, 1, [2])]   # a method's test: after it
    assert misplaced_tests([box, uses_box, area]) == []                        # before its methods: in place too


def test_every_test_follows_its_code():
    found = {}
    for path in sorted((ROOT / "nbs").rglob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        for i, subject, between in misplaced_tests(cells):
            first = "".join(cells[i]["source"]).splitlines()[0][:70]
            found.setdefault(str(path.relative_to(ROOT)), []).append(
                f"cell {i} ({first!r}) tests cell {subject}, but exported cells {between} come in between")
    assert found == {}, json.dumps(found, indent=1)
