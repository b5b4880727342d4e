"""Which structural header a generator's contexts get (``Contextualizer(structural_header=True)``).

By default the header is `StructuralContextGenerator`'s (file, section, enclosing definitions),
and that generator's own contexts get none. A generator for other kinds of chunk declares its own
header by implementing `StructuralHeaderSource` (crops of frames get the structural crop context).

Example:
    >>> from contextual_retrieval_core.generators.structural import StructuralContextGenerator
    >>> header_generator_for(StructuralContextGenerator()) is None
    True
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from contextual_retrieval_core.generators.base import ContextGenerator

__all__ = ["StructuralHeaderSource", "header_generator_for", "writes_structural_context"]


@runtime_checkable
class StructuralHeaderSource(Protocol):
    """A generator that names the generator of the structural header its contexts get.

    `structural_header_generator` returns that generator, or None when the generator's own
    contexts are structural already (they get no header).
    """

    def structural_header_generator(self) -> ContextGenerator | None:
        ...


def header_generator_for(generator: Any, default: ContextGenerator | None = None) -> ContextGenerator | None:
    """The generator whose context goes on a line before `generator`'s: its declared one
    (`StructuralHeaderSource`), None for the structural generators, else `default` (a
    `StructuralContextGenerator` built here when not given)."""
    if isinstance(generator, StructuralHeaderSource):
        return generator.structural_header_generator()
    from contextual_retrieval_core.generators.structural import StructuralContextGenerator

    if isinstance(generator, StructuralContextGenerator):
        return None
    return default if default is not None else StructuralContextGenerator()


def writes_structural_context(generator: Any) -> bool:
    """Whether `generator`'s contexts are structural themselves (they get no header)."""
    if isinstance(generator, StructuralHeaderSource):
        return generator.structural_header_generator() is None
    from contextual_retrieval_core.generators.structural import StructuralContextGenerator

    return isinstance(generator, StructuralContextGenerator)
