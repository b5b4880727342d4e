"""House rules of the code base (issue 11's acceptance), checked on the source: one
positive-integer check (`checks.positive_int`), generators' labels read through `label_of`, no
`hasattr` probing of generators, one walk down an error chain (`_sdk.error_chain`). (The layout rules, one concept per module in its stage folder and
no import circle, are tests/unit/project/test_import_graph.py's.)"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.source_tree import ROOT, nodes, sources


def where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(ROOT)}:{node.lineno}"


def test_the_positive_integer_check_has_one_home() -> None:
    """`isinstance(x, bool) or not isinstance(x, int) ...` or a "must be positive" message outside
    checks.py is a near-copy of `checks.positive_int`."""
    copies = []
    for path in sources():
        if path.name == "checks.py" and path.parent.name == "contextual_retrieval_core":
            continue
        docstrings = {id(n.value) for n in nodes(path) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
        for node in nodes(path):
            if id(node) in docstrings:
                continue
            if isinstance(node, ast.BoolOp):
                text = ast.unparse(node)
                if "isinstance(" in text and ", bool)" in text and "int" in text and ("<= 0" in text or "< 1" in text):
                    copies.append(where(path, node))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                if "must be positive" in node.value or "must be a positive integer" in node.value:
                    copies.append(where(path, node))
            elif isinstance(node, ast.JoinedStr):
                text = "".join(v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str))
                if "must be positive" in text or "must be a positive integer" in text:
                    copies.append(where(path, node))
    assert copies == [], f"use checks.positive_int instead: {copies}"


def test_generators_are_read_through_their_protocol_not_probed() -> None:
    probes = []
    for path in sources():
        for node in nodes(path):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args):
                continue
            if node.func.id == "hasattr" and "gen" in ast.unparse(node.args[0]).lower():
                probes.append(where(path, node))
            if (node.func.id == "getattr" and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                    and node.args[1].value == "label" and not path.match("generators/base.py")):
                probes.append(where(path, node))
    assert probes == [], f"read a generator's label with generators.base.label_of, declare capabilities as Protocols: {probes}"


def test_the_walk_down_an_error_chain_has_one_home() -> None:
    """`e.__cause__ or e.__context__` outside `_sdk.error_chain` is a copy of that walk (and,
    written without its `seen` set, a loop that never ends on an error chained to itself)."""
    copies = [
        where(path, node)
        for path in sources() if not path.match("contextual_retrieval_core/_sdk.py")
        for node in nodes(path)
        if isinstance(node, ast.BoolOp)
        and {"__cause__", "__context__"} <= {v.attr for v in node.values if isinstance(v, ast.Attribute)}
    ]
    assert copies == [], f"walk an error's chain with contextual_retrieval_core._sdk.error_chain: {copies}"
