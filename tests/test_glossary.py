"""The public signatures use the glossary's names (GUIDE.md, "Names that mean one thing"): one word, one meaning."""
import importlib, inspect, pkgutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# each glossary term, and the names the API must not use for it
TERMS = {"method": ("noise", "noise_method"), "sigma_p": ("sigma",), "budget": ("scale",)}
# where a term's rule holds (default: the whole API): elsewhere `scale` is another quantity (the losses' output scale,
# a plot's drawing scale, the bond-length factor of anids.analysis.md_stability)
SCOPE = {"budget": "anids.experiments"}
# a `preset` is a backbone's size (anids.nn.backbones.PRESETS), never an experiment's budget: the public functions of
# anids.experiments with a parameter `preset`, each taking a backbone's size (a new one must be checked and added)
BACKBONE_PRESET_PARAMETERS = {"anids.experiments.protocols.cost_table", "anids.experiments.ablation.ablation_c_checkpoint",
                              "anids.experiments.crystal_results.records_from_results", "anids.experiments.case_study.pretrain_generator",
                              "anids.experiments.case_study.make_case_study_checkpoints"}
# parameters that carry a forbidden word with another meaning, and why
ALLOWED = {("anids.train.pretraining.denoising_loss_under", "noise"):
           "a pre-training's noise (its generator's checkpoint) that a denoiser is scored under, not a method name"}


def glossary() -> str:
    text = (ROOT / "GUIDE.md").read_text()
    return text.split("## Names that mean one thing", 1)[1].split("\n## ", 1)[0]


def public_callables():
    import anids
    for info in pkgutil.walk_packages(anids.__path__, "anids."):
        if info.name.rsplit(".", 1)[-1].startswith("_"): continue
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
                if p in forbidden and mod.startswith(SCOPE.get(term, "anids")) and (f"{mod}.{name}", p) not in ALLOWED:
                    bad.append(f"{mod}.{name}({p}=...): say {term}")
    assert seen > 200, seen          # the walk reaches the whole API
    assert bad == [], bad


def test_old_keywords_are_errors():
    import pytest
    from anids.method.model import build_model
    from anids.experiments import run_md17
    # one name per thing: an old keyword is Python's TypeError (a signature) or the settings' ValueError (**overrides)
    with pytest.raises(TypeError, match="unexpected keyword argument 'sigma'"): build_model("painn", "tiny", "dens", sigma=0.2)
    with pytest.raises(ValueError, match=r"unknown settings \['scale'\]"): run_md17("ethanol", scale="paper")


def test_no_old_names_kept_alive():
    # the package was never released under other names: nothing in it warns that a name moved
    import anids
    from pathlib import Path
    hits = [str(p) for p in Path(anids.__file__).parent.rglob("*.py") if "FutureWarning" in p.read_text()]
    assert hits == [], hits


def test_the_experiments_take_a_budget():
    from anids.experiments import run_md17, run_benchmark
    from anids.train.pretraining import pretrain
    from anids.experiments.crystals import crystal_setup, CrystalSetup
    for f in (run_md17, pretrain, run_benchmark, crystal_setup):
        params = inspect.signature(f).parameters
        assert "budget" in params and "scale" not in params and "preset" not in params, f.__name__
    assert "budget" in inspect.signature(CrystalSetup).parameters


def test_a_preset_in_the_experiments_is_a_backbone_size():
    found = set()
    for mod, name, f in public_callables():
        if not mod.startswith("anids.experiments"): continue
        try: params = inspect.signature(f).parameters
        except (TypeError, ValueError): continue
        if "preset" in params: found.add(f"{mod}.{name}")
    assert found == BACKBONE_PRESET_PARAMETERS, found ^ BACKBONE_PRESET_PARAMETERS
