"""Sphinx configuration of the documentation site (`bash .ci/docs`; sources staged by `docs/stage.py`).

MyST-NB renders the notebooks from their stored content (never executes them); autodoc documents the `anids`
package of this checkout, with the parameter comments of its signatures (nbdev's docments) as parameter lists.
"""
import importlib.util
import inspect
import re
import sys
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # document this checkout's package, whatever is installed

import anids  # noqa: E402

project = "AniDS compendium"
author = "AniDS compendium developers"
copyright = "AniDS compendium developers"
release = version = anids.__version__

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.mathjax"]
# MathJax from the build itself (sphinx-mathjax-offline, in the docs extra) so that equations render offline;
# without it, from a CDN.
if importlib.util.find_spec("sphinx-mathjax-offline"): extensions.append("sphinx-mathjax-offline")

# notebooks: stored content only, as the test suite is what executes them
nb_execution_mode = "off"
nb_merge_streams = True
myst_enable_extensions = ["dollarmath"]  # not amsmath: it would take a `\begin{pmatrix}` line inside $$...$$ for a block
myst_dmath_double_inline = True  # $$...$$ inside a paragraph (as Jupyter allows) is display math
myst_heading_anchors = 3
# \text{attn\_hidden} as Jupyter shows it: MathJax's textmacros reads \_ inside \text
mathjax3_config = {"loader": {"load": ["[tex]/textmacros"]}, "tex": {"packages": {"[+]": ["textmacros"]}}}

# API
autodoc_default_options = {"members": True, "undoc-members": True, "show-inheritance": True,
                           "member-order": "bysource"}
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autoclass_content = "class"
autodoc_inherit_docstrings = False  # an overridden torch/Lightning method does not bring its base's long docstring
default_role = "py:obj"  # `name` in a docstring links to the object where it can, else it is shown as code
add_module_names = False
python_display_short_literal_types = True

exclude_patterns = ["_build", "**.ipynb_checkpoints"]
suppress_warnings = ["myst.header", "misc.highlighting_failure"]

html_theme = "furo" if importlib.util.find_spec("furo") else "alabaster"
html_title = f"AniDS compendium {release}"
html_static_path = ["_static"]
html_css_files = ["anids.css"]
html_show_sourcelink = False
html_copy_source = False


def _plain_docstring(app, what, name, obj, options, lines):
    "The package's docstrings are plain text with `code` spans (nbdev style), not reStructuredText: escape its markup"
    if not name.startswith("anids."): return
    if what == "data" and type(obj).__doc__ and "\n".join(lines).strip() == inspect.cleandoc(type(obj).__doc__):
        lines[:] = []  # an undocumented constant: not the docstring of its type (dict, tuple, ...)
    out = []
    for line in lines:
        if re.fullmatch(r"\s*-{3,}\s*", line) and out and out[-1].strip():  # a NumPy-style section: a small heading
            out[-1:] = ["", f".. rubric:: {out[-1].strip()}", ""]
        else:
            out.append(_rst_text(line))
    lines[:] = out


def _docments(app, what, name, obj, options, lines):
    "Append the comments beside a function's or class's parameters (nbdev's docments) as a parameter list"
    if what not in ("function", "method", "class") or ".. rubric:: Parameters" in lines: return
    try:
        from fastcore.docments import docments
        docs = docments(obj, full=False)
    except Exception:
        return
    params = [(k, v) for k, v in docs.items() if v and k not in ("self", "cls", "return")]
    if not params and not docs.get("return"): return
    if lines and lines[-1].strip(): lines.append("")
    for k, v in params: lines.append(f":param {k}: {_rst_text(v)}")
    if docs.get("return"): lines.append(f":returns: {_rst_text(docs['return'])}")
    lines.append("")


def _rst_text(s: str) -> str:
    "A comment as reStructuredText: `code` spans kept, the markup characters a comment means literally escaped"
    if s.count("`") % 2: s = s.replace("`", "'")
    esc = lambda t: t.replace("\\", "\\\\").replace("*", r"\*").replace("|", r"\|").replace("_", r"\_")
    return "`".join(p if i % 2 else esc(p) for i, p in enumerate(s.split("`")))


def _greek(m):
    name = m.group(1)
    try: return unicodedata.lookup(f"GREEK {'CAPITAL' if name[0].isupper() else 'SMALL'} LETTER {name.upper()}")
    except KeyError: return name


def _plain_title(app, pagename, templatename, context, doctree):
    "The browser's title bar cannot typeset math: `\\(\\psi\\)` becomes ψ, `\\(\\mathbf{\\Sigma}_i\\)` Σ_i"
    def plain(m):
        t = re.sub(r"\\(?:mathbf|mathrm|boldsymbol|text)\{([^}]*)\}", r"\1", m.group(1))
        return re.sub(r"\\([A-Za-z]+)", _greek, t)
    if context.get("title"): context["title"] = re.sub(r"\\\((.*?)\\\)", plain, context["title"])


def setup(app):
    app.connect("autodoc-process-docstring", _plain_docstring)
    app.connect("autodoc-process-docstring", _docments)
    app.connect("html-page-context", _plain_title)
    app.set_html_assets_policy("always")  # MathJax on every page: the sidebar shows notebook titles with math
