"""The package's folders show its design (docs/architecture.md, "The package"): a short top level,
folders of a size a reader takes in, and imports that point from the command line toward the
core, with the one documented exception. LAYERS lists them from the face to the core: a module
imports modules of its own layer and of the layers after it."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Set

import pytest

from test_import_cycles import ROOT, all_imports, import_graph, package_modules

LAYERS = [
    {"rvvkit", "rvvkit.__main__", "cli", "doctor"},
    {"builder", "precompile", "measure", "conformance", "zoo"},
    {"runtime"},
    {"llm"},
    {"frontend", "codegen", "jit"},
    {"passes"},
    {"ops"},
    {"ir", "artifact"},
    {"errors", "dtypes", "resources", "children", "version"},
]
# An operator's table entry holds its every form: activation rows name their RVV helpers in
# codegen/, and the catalog attaches the lowerings before it lists them (both inside
# functions, so ops/ loads without codegen/).
ALLOWED_UP = {"rvvkit.ops.activations", "rvvkit.ops.activations_modern", "rvvkit.ops.catalog"}
TOP_LEVEL_MODULES = 10        # public entry points and the base modules
FILES_PER_FOLDER = 22


def part(module: str) -> str:
    """The layer member a dotted module belongs to: its sub-package under rvvkit, or itself."""
    parts = module.split(".")
    return module if len(parts) == 1 or module == "rvvkit.__main__" else parts[1]


def layer(module: str) -> int:
    p = part(module)
    for i, members in enumerate(LAYERS):
        if p in members:
            return i
    raise AssertionError(f"{module} is in no layer: add its package to LAYERS (and to "
                         "docs/architecture.md's picture)")


def test_every_module_has_a_layer():
    for mod in package_modules():
        layer(mod)


def test_imports_point_toward_the_core():
    """Every import, at any level (inside functions too), goes to the importer's layer or one
    below it, except the operator table's late imports of its own code forms."""
    mods = package_modules()
    up = []
    for mod, targets in import_graph(mods, all_imports).items():
        for t in targets:
            if part(t) != part(mod) and layer(t) < layer(mod) and mod not in ALLOWED_UP:
                up.append(f"{mod} -> {t}")
    assert not up, "imports that run back up (docs/architecture.md):\n" + "\n".join(sorted(up))


def test_allowed_exceptions_are_still_needed_and_late():
    """The exceptions are imports inside functions, and they still exist (else drop them)."""
    mods = package_modules()
    everywhere = import_graph(mods, all_imports)
    at_load = import_graph(mods)
    for mod in ALLOWED_UP:
        to_codegen = {t for t in everywhere[mod] if part(t) == "codegen"}
        assert to_codegen, f"{mod} no longer imports codegen: remove it from ALLOWED_UP"
        assert not {t for t in at_load[mod] if part(t) == "codegen"}, \
            f"{mod} imports codegen while it loads: ops/ must load without the code generator"


def test_top_level_is_short_and_folders_are_readable():
    top = sorted(p.name for p in ROOT.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(top) <= TOP_LEVEL_MODULES, f"rvvkit/ holds {len(top)} modules: {top}"
    for folder in [ROOT, *[p for p in ROOT.rglob("*") if p.is_dir() and p.name != "__pycache__"]]:
        files = [p for p in folder.iterdir() if p.is_file() and p.suffix == ".py"]
        assert len(files) <= FILES_PER_FOLDER, \
            f"{folder.relative_to(ROOT.parent)} holds {len(files)} modules: group them"


@pytest.mark.parametrize("package", sorted(
    str(p.parent.relative_to(ROOT.parent)) for p in ROOT.rglob("__init__.py")))
def test_every_package_says_what_lives_there(package):
    """A folder's __init__ opens with a docstring of at least a sentence."""
    import ast
    doc = ast.get_docstring(ast.parse((ROOT.parent / package / "__init__.py").read_text()))
    assert doc and len(doc) >= 60, f"{package}/__init__.py: no docstring saying what is there"
