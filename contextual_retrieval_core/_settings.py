"""What the settings homes (`FusionConfig`, `ContextualizeConfig`, `PruningConfig`, `VoyageBatching`,
`MilvusConfig`) share: a field with a one-line description, the class methods the frameworks' flat
fields are generated from, and a validated copy (`replace`) or a config read from a part's flat
fields (`of`)."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar, get_type_hints

__all__ = ["setting", "Settings"]

S = TypeVar("S", bound="Settings")


def setting(default: Any, doc: str, *, secret: bool = False) -> Any:
    """A settings field with its one-line description (what flat framework fields show); a
    `secret` one (a credential) is left out of the config's repr."""
    return dataclasses.field(default=default, metadata={"doc": doc}, repr=not secret)


class Settings:
    """A mixin for frozen settings dataclasses: their field names, descriptions and specs."""

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The settings, in declaration order: the one list every flat signature derives from."""
        return tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]

    @classmethod
    def field_doc(cls, name: str) -> str:
        """The one-line description of setting `name`."""
        return next(f.metadata["doc"] for f in dataclasses.fields(cls) if f.name == name)  # type: ignore[arg-type]

    @classmethod
    def field_specs(cls) -> list[tuple[str, Any, Any, str]]:
        """(name, type, default, description) of every setting: what a framework turns into fields."""
        hints = get_type_hints(cls)
        return [(f.name, hints[f.name], f.default, f.metadata["doc"]) for f in dataclasses.fields(cls)]  # type: ignore[arg-type]

    @classmethod
    def of(cls: type[S], part: Any) -> S:
        """The config a framework part's flat fields hold (every `field_names` attribute of `part`),
        validated as any other."""
        return cls(**{name: getattr(part, name) for name in cls.field_names()})

    def replace(self: S, **changes: Any) -> S:
        """A copy with `changes` (validated again)."""
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]
