"""Chroma-style metadata `where` filters evaluated in Python, on any metadata mapping.

The BM25 side of a filtered hybrid query must keep exactly the chunks the vector store's own
filter keeps; this reads a where dict as Chroma does, for both frameworks' BM25 masks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from numbers import Real
from typing import Any

from contextual_retrieval_core.errors import InputError

__all__ = ["where_predicate"]

_COMPARE = {"$gt": lambda a, b: a > b, "$gte": lambda a, b: a >= b, "$lt": lambda a, b: a < b, "$lte": lambda a, b: a <= b}
_MISSING = object()


def _check_where(where: Mapping[str, Any]) -> None:
    if not where:
        raise InputError("filter is an empty dict: pass e.g. {'team': 'web'}, or filter=None for no filter")
    for key, cond in where.items():
        if key in ("$and", "$or"):
            if not isinstance(cond, list) or not cond:
                raise InputError(f"filter: {key} takes a non-empty list of where dicts, got {cond!r}")
            for sub in cond:
                if not isinstance(sub, Mapping):
                    raise InputError(f"filter: {key} takes a list of where dicts, got an item {sub!r}")
                _check_where(sub)
        elif key.startswith("$"):
            raise InputError(f"filter: unknown logical operator {key!r}; use $and or $or")
        elif isinstance(cond, Mapping):
            for op, value in cond.items():
                if op in _COMPARE and not _number(value):
                    raise InputError(f"filter: {op} on {key!r} compares numbers, got {value!r}")
                if op in ("$in", "$nin") and not isinstance(value, list):
                    raise InputError(f"filter: {op} on {key!r} takes a list, got {value!r}")
                if op not in _COMPARE and op not in ("$eq", "$ne", "$in", "$nin"):
                    raise InputError(f"filter: unknown operator {op!r} on {key!r}; use $eq $ne $gt $gte $lt $lte $in $nin")


def _matches(where: Mapping[str, Any], metadata: Mapping[str, Any]) -> bool:
    for key, cond in where.items():
        if key == "$and":
            ok = all(_matches(sub, metadata) for sub in cond)
        elif key == "$or":
            ok = any(_matches(sub, metadata) for sub in cond)
        else:
            value = metadata.get(key, _MISSING)
            ops = cond.items() if isinstance(cond, Mapping) else [("$eq", cond)]
            ok = all(_holds(op, value, operand) for op, operand in ops)
        if not ok:
            return False
    return True


def _holds(op: str, value: Any, operand: Any) -> bool:
    if op == "$eq":
        return _equal(value, operand)
    if op == "$ne":
        return not _equal(value, operand)
    if op == "$in":
        return any(_equal(value, o) for o in operand)
    if op == "$nin":
        return not any(_equal(value, o) for o in operand)
    return _number(value) and _COMPARE[op](value, operand)


def _equal(value: Any, operand: Any) -> bool:
    return value is not _MISSING and isinstance(value, bool) == isinstance(operand, bool) and value == operand


def _number(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def where_predicate(where: Mapping[str, Any]) -> Callable[[Mapping[str, Any]], bool]:
    """`where` as a predicate on a metadata mapping, read as Chroma reads it (``$eq $ne $gt $gte
    $lt $lte $in $nin $and $or``; several keys in one dict are all required; ``$ne`` / ``$nin``
    also match metadata without the key; ``True`` never equals ``1``). An empty dict, an unknown
    operator or a comparison with a non-number is a ValueError naming it.

    Example:
        >>> keep = where_predicate({"$and": [{"team": "web"}, {"year": {"$gte": 2023}}]})
        >>> keep({"team": "web", "year": 2024}), keep({"team": "web"})
        (True, False)
    """
    _check_where(where)
    return lambda metadata: _matches(where, metadata)
