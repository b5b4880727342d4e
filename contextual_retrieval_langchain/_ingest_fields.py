"""`ContextualDocumentTransformer`'s ingestion fields, generated from `ContextualizeConfig`.

Every `ContextualizeConfig` setting is a pydantic field of the transformer, with the config's
name, type, default and description; the values are validated by the core (a run builds its
config from them: `ContextualizeConfig.of`), so a setting means the same and fails the same way
as in a core `Contextualizer`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, create_model, model_validator

from contextual_retrieval_core.contextualize.config import ContextualizeConfig

__all__ = ["ContextualizeFields"]


def _config_fields() -> dict[str, Any]:
    return {name: (kind, Field(default=default, description=doc)) for name, kind, default, doc in ContextualizeConfig.field_specs()}


class _Checked(BaseModel):
    @model_validator(mode="after")
    def _valid_config(self) -> Any:
        ContextualizeConfig.of(self)  # the core's checks, naming the setting and the fix
        return self

    @property
    def contextualize_config(self) -> ContextualizeConfig:
        """The `ContextualizeConfig` the ingestion fields hold now."""
        return ContextualizeConfig.of(self)


if TYPE_CHECKING:  # the generated fields are read by name; to a type checker this is the base
    ContextualizeFields = _Checked
else:
    ContextualizeFields = create_model("_WithContextualizeFields", __base__=_Checked, **_config_fields())
