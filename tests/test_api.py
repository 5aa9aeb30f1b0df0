"""agentlog.api: every public name resolves, and importing the module costs nothing."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import agentlog.api as api

API_FILE = Path(api.__file__)
HEAVY = ("duckdb", "pyarrow", "deltalake", "tantivy", "orjson", "click", "rich")


@pytest.mark.parametrize("name", api.__all__)
def test_every_public_name_resolves(name: str) -> None:
    value = getattr(api, name)
    assert value is not None
    module, _, attr = api._LAZY[name].partition(":")
    if attr:
        assert value is getattr(sys.modules[module], attr)
    else:
        assert value is sys.modules[module]


def test_the_table_and_all_agree() -> None:
    assert len(api.__all__) == len(set(api.__all__))
    assert set(api.__all__) == set(api._LAZY)


def test_type_checking_block_names_every_public_name() -> None:
    """The ``if TYPE_CHECKING`` imports (what mypy and a reader see) name the same
    things as the lazy table, from the same modules."""
    tree = ast.parse(API_FILE.read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    seen: dict[str, str] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom)
        for alias in node.names:
            name = alias.asname or alias.name
            full = f"{node.module}.{alias.name}"
            seen[name] = full
    expected = {n: t.replace(":", ".") for n, t in api._LAZY.items()}
    assert seen == expected


def test_import_loads_nothing_heavy() -> None:
    code = ("import json, sys; import agentlog.api; "
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
            f"{HEAVY!r} or m.startswith('agentlog'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = json.loads(out)
    assert loaded == ["agentlog", "agentlog.api"]


def test_a_name_loads_only_its_module() -> None:
    """Asking for one name imports its module, not every module the API names."""
    code = ("import json, sys; from agentlog.api import verify_log; "
            "print(json.dumps([m for m in ('duckdb', 'tantivy', 'agentlog.memory.service') if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


def test_unknown_attribute_raises_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_thing"):
        getattr(api, "no_such_thing")
    with pytest.raises(ImportError):
        exec("from agentlog.api import no_such_thing", {})


def test_dir_lists_the_public_names() -> None:
    assert set(api.__all__) <= set(dir(api))
