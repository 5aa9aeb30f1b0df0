"""JSON Schema (draft 2020-12) of the wire-form event, generated from ``model``.

``python -m agentlog.core.schema`` prints it; ``docs/event.schema.json`` holds the
committed copy and a test fails when it drifts from the dataclasses.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import json
import types
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from agentlog.core import model

# wire names that differ from field names
_RENAMES = {("Outcome", "failure_class"): "class"}
_WIRE_NAMES = {
    "Event": "event",
    "ToolRef": "tool",
    "AgentRef": "agent",
    "Outcome": "outcome",
    "ProjectRef": "project",
}


def _type_schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    origin = get_origin(tp)
    if tp is Any:
        return {}
    if origin is Literal:
        return {"type": "string", "enum": list(get_args(tp))}
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        return _type_schema(args[0], defs) if len(args) == 1 else {"anyOf": [_type_schema(a, defs) for a in args]}
    if origin is tuple:
        return {"type": "array", "items": _type_schema(get_args(tp)[0], defs)}
    if origin in (collections.abc.Mapping, dict) or tp is dict:
        return {"type": "object"}
    if dataclasses.is_dataclass(tp):
        name = str(getattr(tp, "__name__"))
        if name not in defs:
            defs[name] = {}
            defs[name] = _dataclass_schema(tp, defs)
        return {"$ref": f"#/$defs/{name}"}
    if tp is str:
        return {"type": "string"}
    if tp is int:
        return {"type": "integer"}
    if tp is bool:
        return {"type": "boolean"}
    raise TypeError(f"no schema for {tp!r}")


def _field_docs(cls: type) -> dict[str, str]:
    """Attribute docstrings (the string literal right after a field)."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for a, b in zip(body, body[1:]):
        if isinstance(a, ast.AnnAssign) and isinstance(a.target, ast.Name) and isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant) and isinstance(b.value.value, str):
            docs[a.target.id] = " ".join(b.value.value.split())
    return docs


def _dataclass_schema(cls: Any, defs: dict[str, Any]) -> dict[str, Any]:
    hints = get_type_hints(cls)
    docs = _field_docs(cls)
    props: dict[str, Any] = {}
    required: list[str] = []
    for f in dataclasses.fields(cls):
        wire = _RENAMES.get((cls.__name__, f.name), f.name)
        s = _type_schema(hints[f.name], defs)
        if f.name in docs:
            s = {**s, "description": docs[f.name]}
        props[wire] = s
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.append(wire)
    out: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        out["required"] = required
    if cls.__doc__:
        out["description"] = " ".join(cls.__doc__.split())
    return out


def event_schema() -> dict[str, Any]:
    defs: dict[str, Any] = {}
    root = _dataclass_schema(model.Event, defs)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:agentlog:schema:event:v1",
        "title": "agentlog canonical event (wire form)",
        **root,
        "$defs": defs,
    }


def render() -> str:
    return json.dumps(event_schema(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    print(render(), end="")
