"""`ContextualDocumentTransformer`: LangChain documents in, contextual chunks out.

A thin adapter over the core `Contextualizer`: it converts LangChain `Document`s to the core's
`Document` / `Chunk`, lets the core situate every chunk (through its persistent context store, so a
second run over the same documents generates nothing), and converts the `ContextualChunk`s back.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from langchain_core.documents import BaseDocumentTransformer
from langchain_core.documents import Document as LCDocument
from langchain_core.language_models import BaseChatModel
from pydantic import ConfigDict, PrivateAttr, field_validator

from contextual_retrieval_core.contextualize.contextualizer import (
    Contextualizer,
    ContextualizeResult,
    contextualizer_for,
    refresh_options,
)
from contextual_retrieval_core.errors import InputError, InputTypeError
from contextual_retrieval_core.generators.prompts import DEFAULT_PROMPT, ContextPrompt
from contextual_retrieval_core.generators.usage import UsageReport
from contextual_retrieval_core.store.context_store import ContextStore
from contextual_retrieval_core.types import Chunk, Document, distinct_documents, number_chunks, stable_chunk_id
from contextual_retrieval_langchain._crops import FRAME_ID_KEY, crop_documents, image_batch, is_image_document
from contextual_retrieval_langchain._documents import CHUNK_INDEX_KEY, contextual_document, document_id_of
from contextual_retrieval_langchain._ingest_fields import ContextualizeFields
from contextual_retrieval_langchain.chat import chat_model_generator

__all__ = ["ContextualDocumentTransformer"]

#: how a splitter is called, in order of preference: TextSplitter, any document transformer, and the
#: header splitters (MarkdownHeaderTextSplitter, HTMLHeaderTextSplitter) whose split_text returns Documents
_SPLIT_METHODS = ("split_documents", "transform_documents", "split_text")

Parents = Mapping[str, LCDocument | str] | Sequence[LCDocument]


class ContextualDocumentTransformer(BaseDocumentTransformer, ContextualizeFields):
    """Splits documents (or takes chunks) and prepends to each chunk its situating context.

    Returned Documents have ``page_content = context + "\\n\\n" + chunk`` (what vector stores
    embed and BM25 indexes) and `id` set to a stable chunk id; their metadata keeps the input's
    plus ``context``, ``original_content``, ``parent_id``, ``chunk_index`` and ``chunk_id``.

    Two ways in:

    - whole documents: ``transformer.transform_documents(documents)``, split by `text_splitter`
      (any LangChain text splitter or document transformer), or without one by the library's
      chunker (as ``contextual-retrieval index`` cuts: code at definitions, then statements, 800
      characters at most; with `fit_chunks`, each chunk, with its context, within `embeddings`'
      window);
    - already-split chunks and their parents: ``transform_documents(chunks, parents=whole_docs)``,
      each chunk naming its parent by ``metadata[parent_id_key]``; `parents` maps parent id to
      the whole Document (or its text), or is a list of whole Documents, whose ids are their
      `Document.id` or ``metadata[parent_id_key]``. Chunks keep their `Document.id` when they
      have one.

    Args:
        text_splitter: splits whole documents: any LangChain text splitter (e.g.
            `RecursiveCharacterTextSplitter`), document transformer, or header splitter
            (`MarkdownHeaderTextSplitter`, `HTMLHeaderTextSplitter`: its pieces keep the document's
            metadata plus the headers). None (default): the library's chunker.
        fit_chunks: the library's chunker also keeps each chunk, with its context, within
            `embeddings`' window: more, shorter chunks, so more LLM requests (default False: a
            chunk longer than the window is embedded whole by the library's embeddings); unused
            with a `text_splitter`.
        embeddings: the embedding the chunks will get, for `fit_chunks` (`EmbedderEmbeddings` or
            any object exposing `max_tokens` and `count_tokens`; default: the library's offline
            MiniLM, 256 tokens).
        generator: who writes the contexts: a core `ContextGenerator` (default: the offline
            `StructuralContextGenerator`) or a LangChain chat model (`ChatAnthropic` gets prompt
            caching).
        prompt: the situating prompt for a chat model (default: the cookbook's).
        prompt_caching: for a chat model: default True for `ChatAnthropic`, else False.
        cache_ttl: prompt-cache TTL for a chat model: "5m" or "1h".
        store: the context store (a path or a `ContextStore`); default: in memory for non-LLM
            generators, ~/.cache/contextual-retrieval/contexts.sqlite3 for LLMs.
        parent_id_key: the metadata key that names a chunk's parent document (and, failing
            `Document.id`, a whole document's id).
        concurrency, mode, grouped, position, separator, show_progress, ...: the ingestion
            settings, one field each, generated from `ContextualizeConfig` (its names, defaults,
            descriptions and checks): ``mode="batch"`` with `AnthropicContextGenerator` or
            `ChatAnthropic` uses Message Batches (50% off); ``grouped=True`` situates small
            documents in one request each (`AnthropicContextGenerator`).
        crop_generator: the core generator for image crops (default: the offline
            `StructuralCropContextGenerator`; `AnthropicCropContextGenerator` for Claude).

    Images: Documents that carry an image in ``metadata["image_path"]`` or
    ``metadata["image_bytes"]`` (or detections in ``metadata["detections"]``) are frames and crops,
    not text: frames are cut into one crop per detection; crops already cut name their frame by
    ``metadata["frame_id"]`` (or come as chunks with their frames as ``parents=``). Every crop is
    situated within its frame by `crop_generator` and comes back, after the text chunks, as a
    Document whose page_content is its context then ``"crop_7.png: truck"``, its image path or
    bytes kept (see `contextual_retrieval_langchain/_crops.py`). Bad frames are refused, all listed,
    before anything is generated; `last_crop_report` is the crops' usage report.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_text_splitters import RecursiveCharacterTextSplitter
        >>> transformer = ContextualDocumentTransformer(
        ...     text_splitter=RecursiveCharacterTextSplitter(chunk_size=40, chunk_overlap=0),
        ...     show_progress=False)
        >>> doc = Document("# Setup\\n## Linux\\nRun make install, then make test.", metadata={"source": "guide.md"})
        >>> chunks = transformer.transform_documents([doc])
        >>> print(chunks[-1].page_content)
        From guide.md, section: Setup > Linux.
        <BLANKLINE>
        Run make install, then make test.
        >>> chunks[-1].metadata["original_content"], chunks[-1].metadata["parent_id"]
        ('Run make install, then make test.', 'guide.md')
        >>> transformer.last_report.generated, transformer.transform_documents([doc]) == chunks
        (2, True)
        >>> transformer.last_report.generated, transformer.last_report.store_hits
        (0, 2)
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")  # a misspelt or removed field is an error

    text_splitter: Any | None = None
    fit_chunks: bool = False
    embeddings: Any | None = None
    generator: Any | None = None
    prompt: ContextPrompt = DEFAULT_PROMPT
    prompt_caching: bool | None = None
    cache_ttl: Literal["5m", "1h"] = "5m"
    store: str | os.PathLike | ContextStore | None = None
    parent_id_key: str = "source"
    crop_generator: Any | None = None

    _contextualizer: Contextualizer | None = PrivateAttr(default=None)
    _last_report: UsageReport | None = PrivateAttr(default=None)
    _crop_contextualizer: Contextualizer | None = PrivateAttr(default=None)
    _last_crop_report: UsageReport | None = PrivateAttr(default=None)

    @field_validator("text_splitter")
    @classmethod
    def _check_splitter(cls, value: Any) -> Any:
        if value is not None and not any(callable(getattr(value, m, None)) for m in _SPLIT_METHODS):
            raise InputTypeError(
                "text_splitter must be a LangChain text splitter (e.g. RecursiveCharacterTextSplitter, "
                f"MarkdownHeaderTextSplitter) or document transformer, got {type(value).__name__}"
            )
        return value

    @field_validator("generator")
    @classmethod
    def _check_generator(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, BaseChatModel) and not callable(getattr(value, "generate", None)):
            raise InputError(f"generator must be a core ContextGenerator or a LangChain chat model (e.g. ChatAnthropic), "
                                 f"got {type(value).__name__}")
        return value

    # -- public ---------------------------------------------------------------------------------

    @property
    def contextualizer(self) -> Contextualizer:
        """The core `Contextualizer` (built on first use, then reused: one store per transformer)."""
        if self._contextualizer is None:
            generator = self.generator
            if isinstance(generator, BaseChatModel):
                generator = chat_model_generator(
                    generator, prompt=self.prompt, prompt_caching=self.prompt_caching, cache_ttl=self.cache_ttl
                )
            self._contextualizer = contextualizer_for(generator, self.store, self)
        return refresh_options(self._contextualizer, self)  # a field set later still counts

    @property
    def last_report(self) -> UsageReport | None:
        """The core's `UsageReport` of the last run: contexts generated, store hits, tokens, cost."""
        return self._last_report

    @property
    def last_crop_report(self) -> UsageReport | None:
        """The core's `UsageReport` of the last run's image crops (None when it had none)."""
        return self._last_crop_report

    @property
    def crop_contextualizer(self) -> Contextualizer:
        """The crops' `Contextualizer`: `crop_generator`, this transformer's store and options."""
        if self._crop_contextualizer is None:
            generator = self.crop_generator
            if generator is None:
                from contextual_retrieval_core.generators.crop_structural import StructuralCropContextGenerator

                generator = StructuralCropContextGenerator()
            self._crop_contextualizer = contextualizer_for(generator, self.contextualizer.store, self)
        return refresh_options(self._crop_contextualizer, self)

    def transform_documents(
        self, documents: Sequence[LCDocument], *, parents: Parents | None = None, **kwargs: Any
    ) -> list[LCDocument]:
        """Contextual chunks of `documents` (whole documents, or chunks when `parents` is given),
        then their image crops."""
        crops, documents, parents = _images_apart(documents, parents, self.parent_id_key)
        out: list[LCDocument] = []
        if documents or crops is None:
            core_docs, chunks, metadata = self._to_core(documents, parents)
            out = self._finish(self.contextualizer.contextualize(core_docs, chunks), metadata)
        self._last_crop_report = None
        if crops is not None:
            out += self._finish_crops(self.crop_contextualizer.contextualize(crops.documents, crops.chunks), crops.documents, bool(documents))
        return out

    async def atransform_documents(
        self, documents: Sequence[LCDocument], *, parents: Parents | None = None, **kwargs: Any
    ) -> list[LCDocument]:
        """Async `transform_documents`: generation requests run concurrently on the caller's loop
        (splitting runs in a worker thread, so a splitter that calls a model never blocks it)."""
        crops, documents, parents = await asyncio.to_thread(_images_apart, documents, parents, self.parent_id_key)
        out: list[LCDocument] = []
        if documents or crops is None:
            core_docs, chunks, metadata = await asyncio.to_thread(self._to_core, documents, parents)
            out = self._finish(await self.contextualizer.acontextualize(core_docs, chunks), metadata)
        self._last_crop_report = None
        if crops is not None:
            result = await self.crop_contextualizer.acontextualize(crops.documents, crops.chunks)
            out += self._finish_crops(result, crops.documents, bool(documents))
        return out

    def _finish_crops(self, result: ContextualizeResult, documents: list[Document], had_text: bool) -> list[LCDocument]:
        self._last_crop_report = result.report
        if not had_text:
            self._last_report = result.report
        return crop_documents(result, documents)

    # -- conversion -----------------------------------------------------------------------------

    def _finish(self, result: ContextualizeResult, metadata: dict[str, dict[str, Any]]) -> list[LCDocument]:
        self._last_report = result.report
        return [contextual_document(c, metadata[c.id]) for c in result.chunks]

    def _to_core(
        self, documents: Sequence[LCDocument], parents: Parents | None
    ) -> tuple[list[Document], list[Chunk], dict[str, dict[str, Any]]]:
        if isinstance(documents, LCDocument):
            raise InputTypeError("pass a list of Documents, not a single Document")
        if parents is None:
            return self._split(documents)
        return self._chunks_with_parents(documents, parents)

    def _split(self, documents: Sequence[LCDocument]) -> tuple[list[Document], list[Chunk], dict[str, dict[str, Any]]]:
        splitter = self.text_splitter

        def id_of(d: LCDocument) -> str:
            return document_id_of(d, self.parent_id_key)

        originals = distinct_documents(documents, id_of, lambda d: d.page_content)
        docs = [Document(id_of(d), d.page_content, dict(d.metadata)) for d in originals]
        pieces: list[tuple[str, LCDocument]] = []
        if splitter is None:
            from contextual_retrieval_core._factories import default_window
            from contextual_retrieval_core.contextualize.fit import chunk_to_fit

            window = default_window(self.embeddings) if self.fit_chunks else None
            generator = self.contextualizer.generator
            for doc, core in zip(originals, docs):
                path = str(doc.metadata.get(self.parent_id_key) or core.id)
                pieces += [(core.id, LCDocument(page_content=piece, metadata={**doc.metadata, "start_index": offset}))
                           for offset, piece in chunk_to_fit(core, window, generator=generator,
                                                             structural_header=self.contextualize_config.structural_header, path=path)]
        for doc in originals if splitter is not None else ():
            pieces += [(id_of(doc), piece) for piece in _split_one(splitter, doc)]
        chunks, metadata = [], {}
        for (_, piece), chunk in zip(pieces, number_chunks((doc_id, p.page_content) for doc_id, p in pieces)):
            if chunk is not None:
                chunks.append(chunk)
                metadata[chunk.id] = dict(piece.metadata)
        return docs, chunks, metadata

    def _chunks_with_parents(
        self, documents: Sequence[LCDocument], parents: Parents
    ) -> tuple[list[Document], list[Chunk], dict[str, dict[str, Any]]]:
        if isinstance(parents, Mapping):
            parent_docs = [
                Document(str(pid), p.page_content if isinstance(p, LCDocument) else p, dict(p.metadata) if isinstance(p, LCDocument) else {})
                for pid, p in parents.items()
            ]
        else:
            parent_docs = [Document(document_id_of(p, self.parent_id_key), p.page_content, dict(p.metadata)) for p in parents]
        by_id = {d.id: d for d in distinct_documents(parent_docs, lambda d: d.id, lambda d: d.text)}
        for doc in documents:
            pid = doc.metadata.get(self.parent_id_key)
            if pid is None:
                raise InputError(
                    f"a chunk has no metadata[{self.parent_id_key!r}] naming its parent document: set "
                    "parent_id_key= to the metadata key that does (e.g. 'source')"
                )
            if str(pid) not in by_id:
                raise InputError(f"chunk names parent {str(pid)!r}, which is not in parents=: pass every chunk's whole document")
        numbered = number_chunks((str(d.metadata[self.parent_id_key]), d.page_content) for d in documents)
        chunks: list[Chunk] = []
        metadata: dict[str, dict[str, Any]] = {}
        for doc, chunk in zip(documents, numbered):
            if chunk is None:  # blank
                continue
            if doc.id or CHUNK_INDEX_KEY in doc.metadata:  # the caller's own id / position win
                index = int(doc.metadata.get(CHUNK_INDEX_KEY, chunk.index))
                cid = str(doc.id) if doc.id else stable_chunk_id(chunk.document_id, index, chunk.text)
                chunk = Chunk(cid, chunk.document_id, chunk.text, index)
            chunks.append(chunk)
            metadata[chunk.id] = dict(doc.metadata)
        used = {c.document_id for c in chunks}
        return [d for pid, d in by_id.items() if pid in used], chunks, metadata


def _images_apart(documents: Sequence[LCDocument], parents: Parents | None, parent_id_key: str) -> tuple[Any, Any, Any]:
    """(the image inputs as a core `CropBatch` or None, the text documents, the text parents).
    Frames and crops are read, and bad ones refused, here: before any context is generated."""
    if isinstance(documents, LCDocument):
        return None, documents, parents
    images = [d for d in documents if is_image_document(d)]
    if not images:
        return None, documents, parents
    texts = [d for d in documents if not is_image_document(d)]
    if parents is None:
        frames = [d for d in images if FRAME_ID_KEY not in d.metadata]
        crops = [d for d in images if FRAME_ID_KEY in d.metadata]
        return image_batch(frames, crops, parent_id_key, crops_by_parent=False), texts, None
    if isinstance(parents, Mapping):
        frames = [p.model_copy(update={"id": str(k)}) for k, p in parents.items() if isinstance(p, LCDocument) and is_image_document(p)]
        rest: Any = {k: p for k, p in parents.items() if not (isinstance(p, LCDocument) and is_image_document(p))}
    else:
        frames = [p for p in parents if is_image_document(p)]
        rest = [p for p in parents if not is_image_document(p)]
    return image_batch(frames, images, parent_id_key, crops_by_parent=True), texts, rest


def _split_one(splitter: Any, doc: LCDocument) -> list[LCDocument]:
    """`doc` split by `splitter`; pieces from a header splitter carry the document's metadata too
    (its own, such as the headers, winning), as `TextSplitter.split_documents` does."""
    if callable(getattr(splitter, "split_documents", None)):
        return list(splitter.split_documents([doc]))
    if callable(getattr(splitter, "transform_documents", None)):
        return list(splitter.transform_documents([doc]))
    pieces = splitter.split_text(doc.page_content)
    if not all(isinstance(p, LCDocument) for p in pieces):
        raise InputTypeError(
            f"{type(splitter).__name__}.split_text returned text, not Documents: pass a LangChain TextSplitter "
            "(with split_documents) or a document transformer as text_splitter"
        )
    return [LCDocument(page_content=p.page_content, metadata={**doc.metadata, **p.metadata}) for p in pieces]
