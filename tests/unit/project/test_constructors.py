"""Small constructors (issue 44): no public constructor in the core takes more than 10 parameters.

The rule: every public class of `contextual_retrieval_core` (defined in a module none of whose
dotted parts starts with an underscore, its own name not starting with one either) is built with
at most `MAX_PARAMETERS` parameters, `self` not counted, ``*args`` and ``**kwargs`` counted as one
each. A class with more options groups the related ones into a settings object, as the query side
does with `FusionConfig`. Exempt, and only these (each entry is checked to exist and to be what
its group says):

- the settings homes themselves: frozen `Settings` dataclasses, one field per setting, whose point
  is to hold every setting of one stage in one place;
- plain result records the library returns and users never build: dataclasses whose fields are
  what a run or a file reports.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pkgutil

import pytest

import contextual_retrieval_core
from contextual_retrieval_core._settings import Settings

MAX_PARAMETERS = 10

#: (a) the settings homes: every setting of one stage, validated once
SETTINGS_HOMES = {
    "contextual_retrieval_core.search.config.FusionConfig",
    "contextual_retrieval_core.contextualize.config.ContextualizeConfig",
    "contextual_retrieval_core.pruning.config.PruningConfig",
    "contextual_retrieval_core.embeddings.voyage.VoyageBatching",
    "contextual_retrieval_core.index.milvus_config.MilvusConfig",
}
#: (b) plain result records the library returns (reports, hits, outcomes, what a folder records)
RESULT_RECORDS = {
    "contextual_retrieval_core.generators.usage.UsageReport",  # what a contextualization run cost
    "contextual_retrieval_core.index.report.IndexReport",  # what an index update did
    "contextual_retrieval_core.index.report.IndexHit",  # one search result of an index
    "contextual_retrieval_core.pruning.result.PruningReport",  # what a pruning call kept
    "contextual_retrieval_core.index.milvus_index.MilvusIndexRecord",  # milvus-index.json
    "contextual_retrieval_core.index.manifest.IndexManifest",  # manifest.json
    "contextual_retrieval_core.chunking.frames.Frame",  # one detected image frame
}


def _public_classes() -> list[type]:
    found = []
    for info in pkgutil.walk_packages(contextual_retrieval_core.__path__, "contextual_retrieval_core."):
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra not installed: its classes cannot be built either
            continue
        for name, cls in vars(module).items():
            if inspect.isclass(cls) and cls.__module__ == module.__name__ and not name.startswith("_"):
                found.append(cls)
    return found


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _parameters(cls: type) -> list[str]:
    """The constructor's parameters, `self` left out; none for a constructor written in C (an
    exception's, `object`'s)."""
    init = cls.__init__
    if not inspect.isfunction(init):
        return []
    return list(inspect.signature(init).parameters)[1:]


CLASSES = _public_classes()


def test_the_walk_finds_the_core_s_classes() -> None:
    names = {_qualified(c) for c in CLASSES}
    assert len(CLASSES) > 100
    assert {"contextual_retrieval_core.pruning.pruner.ContextPruner",
            "contextual_retrieval_core.index.milvus_index.MilvusContextualIndex"} <= names
    assert names >= SETTINGS_HOMES | RESULT_RECORDS, "an exemption names a class that is gone: remove it"


def test_no_public_constructor_takes_more_than_ten_parameters() -> None:
    exempt = SETTINGS_HOMES | RESULT_RECORDS
    over = {_qualified(c): len(_parameters(c)) for c in CLASSES
            if len(_parameters(c)) > MAX_PARAMETERS and _qualified(c) not in exempt}
    assert not over, (f"constructors over {MAX_PARAMETERS} parameters: {over}; group related options into a frozen "
                      "settings dataclass (contextual_retrieval_core._settings.Settings), as FusionConfig does")


@pytest.mark.parametrize("name", sorted(SETTINGS_HOMES))
def test_a_settings_home_is_a_frozen_settings_dataclass(name: str) -> None:
    (cls,) = [c for c in CLASSES if _qualified(c) == name]
    assert issubclass(cls, Settings) and dataclasses.is_dataclass(cls)
    assert cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    assert all(f.metadata.get("doc") for f in dataclasses.fields(cls)), "every setting has its one-line description"


@pytest.mark.parametrize("name", sorted(RESULT_RECORDS))
def test_a_result_record_is_a_plain_dataclass(name: str) -> None:
    (cls,) = [c for c in CLASSES if _qualified(c) == name]
    assert dataclasses.is_dataclass(cls) and not issubclass(cls, Settings)


@pytest.mark.parametrize("package", ["contextual_retrieval_langchain", "contextual_retrieval_llamaindex"])
def test_the_adapters_classes_have_at_most_ten_fields_of_their_own(package: str) -> None:
    """Issue 44: an adapter's exported pydantic class has at most 10 fields of its own, not counting
    those its framework base declares or those generated from a settings home (`FusionConfig`,
    `ContextualizeConfig`, `PruningConfig`: flat fields are the frameworks' habit)."""
    import pydantic

    from contextual_retrieval_core.contextualize.config import ContextualizeConfig
    from contextual_retrieval_core.pruning import PruningConfig
    from contextual_retrieval_core.search.config import FusionConfig

    generated = {*ContextualizeConfig.field_names(), *FusionConfig.field_names(), *PruningConfig.field_names()}
    module = importlib.import_module(package)
    checked = 0
    for name in module.__all__:
        cls = getattr(module, name)
        if not (inspect.isclass(cls) and issubclass(cls, pydantic.BaseModel)):
            continue
        framework = [b for b in cls.__mro__ if issubclass(b, pydantic.BaseModel) and not b.__module__.startswith("contextual_retrieval")
                     and not b.__name__.startswith("_With")]
        inherited = {f for b in framework for f in b.model_fields}
        own = [f for f in cls.model_fields if f not in inherited and f not in generated]
        assert len(own) <= 10, (name, own)
        checked += 1
    assert checked >= 5
