"""The package is layered like the paper: each layer imports only the layers before it, and no module imports,
directly or through others (lazy imports inside functions included), a module that imports it back."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "anids"
LAYERS = ["provenance", "data", "nn", "method", "train", "analysis", "results", "experiments", "report"]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    "Every anids module `path` imports, at the top or inside a function, absolute or relative."
    me, out = module_name(path), set()
    package = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("anids.")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            if not base.startswith("anids"): continue
            for a in node.names:   # `from anids.data import datasets` imports a module
                out.add(f"{base}.{a.name}" if (PKG.parent / f"{base}.{a.name}".replace(".", "/")).with_suffix(".py").is_file() else base)
    return {m for m in out if m != me}


def layer(mod: str) -> int:
    parts = mod.split(".")
    return LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else -1


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports(p) for p in PKG.rglob("*.py") if p.name != "_modidx.py"}


def test_every_module_has_a_layer():
    mods = [m for m in graph() if m != "anids"]
    assert mods and all(layer(m) >= 0 for m in mods), [m for m in mods if layer(m) < 0]
    assert {m.split(".")[1] for m in mods} == set(LAYERS)


def test_no_import_upward():
    g = graph()
    # the reader sees imports of every kind: top-level, relative, inside functions, of a module from its package
    assert {"anids.nn.graphs", "anids.method.noise"} <= g["anids.method.model"]
    assert "anids.results.sections" in g["anids.experiments.ablation"]          # a lazy import inside a function
    assert "anids.data.datasets" in g["anids.train.cli"]                            # `from anids.data import datasets`
    up = [(m, d) for m, deps in g.items() if layer(m) >= 0 for d in deps if layer(d) > layer(m)]
    assert up == [], up


def test_no_import_circle():
    g = graph()
    g = {m: {d for d in deps if d in g} for m, deps in g.items() if m != "anids"}   # the package root only re-exports
    state, cycles = {}, []
    def visit(m, stack):
        state[m] = 1
        for d in g.get(m, ()):
            if state.get(d) == 1: cycles.append(stack[stack.index(d):] + [d] if d in stack else [m, d])
            elif d not in state: visit(d, stack + [d])
        state[m] = 2
    for m in sorted(g):
        if m not in state: visit(m, [m])
    assert cycles == [], cycles
