"""The public signatures use the glossary's names (GUIDE.md, "Names that mean one thing"): one word, one meaning."""
import importlib, inspect, pkgutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# each glossary term, and the names the API must not use for it
TERMS = {"method": ("noise", "noise_method"), "sigma_p": ("sigma",)}
# parameters that carry a forbidden word with another meaning, and why
ALLOWED = {("anids.experiments.protocols.denoising_loss_under", "noise"):
           "a pre-training's noise (its generator's checkpoint) that a denoiser is scored under, not a method name"}


def glossary() -> str:
    text = (ROOT / "GUIDE.md").read_text()
    return text.split("## Names that mean one thing", 1)[1].split("\n## ", 1)[0]


def public_callables():
    import anids
    for info in pkgutil.walk_packages(anids.__path__, "anids."):
        if info.name.rsplit(".", 1)[-1].startswith("_") or info.name == "anids.moved": continue
        mod = importlib.import_module(info.name)
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name)
            if inspect.isfunction(obj): yield info.name, name, obj
            elif inspect.isclass(obj):
                yield info.name, name, obj.__init__
                for k, v in vars(obj).items():
                    if inspect.isfunction(v) and not k.startswith("_"): yield info.name, f"{name}.{k}", v


def test_the_glossary_defines_each_term():
    g = glossary()
    for term in TERMS: assert f"**{term}**" in g, term


def test_public_signatures_use_the_glossary_names():
    seen, bad = 0, []
    for mod, name, f in public_callables():
        try: params = inspect.signature(f).parameters
        except (TypeError, ValueError): continue
        seen += 1
        for p in params:
            for term, forbidden in TERMS.items():
                if p in forbidden and (f"{mod}.{name}", p) not in ALLOWED: bad.append(f"{mod}.{name}({p}=...): say {term}")
    assert seen > 200, seen          # the walk reaches the whole API
    assert bad == [], bad


def test_old_keywords_still_work_and_warn():
    import pytest
    from anids.method.model import build_model
    with pytest.warns(FutureWarning, match=r"build_model\(sigma=...\) is now build_model\(sigma_p=...\)"):
        assert build_model("painn", "tiny", "dens", sigma=0.2).generator.sigma_p == 0.2
