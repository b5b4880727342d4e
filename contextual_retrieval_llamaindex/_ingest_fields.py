"""`ContextualNodeParser`'s ingestion fields, generated from `ContextualizeConfig`.

Every `ContextualizeConfig` setting is a pydantic field of the parser, with the config's name,
type, default and description (so an `IngestionPipeline` keys its cache on them and `to_dict`
saves them); the values are validated by the core (a run builds its config from them:
`ContextualizeConfig.of`), so a setting means the same and fails the same way as in a core
`Contextualizer`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from llama_index.core.bridge.pydantic import Field, create_model, model_validator
from llama_index.core.node_parser import NodeParser

from contextual_retrieval_core._settings import Settings
from contextual_retrieval_core.contextualize.config import ContextualizeConfig

__all__ = ["ContextualizeFields", "with_config_fields"]


def with_config_fields(base: type[Any], config: type[Settings], name: str) -> Any:
    """`base` with one pydantic field per setting of `config` (its name, type, default and
    description) and the core's checks of them whenever the model is built (`config.of`: the
    error names the setting and the fix). The one way the adapter's settings homes become fields."""

    def _valid_config(self: Any) -> Any:
        config.of(self)
        return self

    fields = {field: (kind, Field(default=default, description=doc)) for field, kind, default, doc in config.field_specs()}
    checks: dict[str, Any] = {"_valid_config": model_validator(mode="after")(_valid_config)}
    return create_model(name, __base__=base, __validators__=checks, **fields)  # type: ignore[call-overload]


class _Checked(NodeParser):
    @property
    def contextualize_config(self) -> ContextualizeConfig:
        """The `ContextualizeConfig` the ingestion fields hold now."""
        return ContextualizeConfig.of(self)


if TYPE_CHECKING:  # the generated fields are read by name; to a type checker this is the base
    ContextualizeFields = _Checked
else:
    ContextualizeFields = with_config_fields(_Checked, ContextualizeConfig, "_WithContextualizeFields")
