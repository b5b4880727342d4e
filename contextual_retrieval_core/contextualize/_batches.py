"""Message Batches for a `Contextualizer` run: submit (first chunks of cacheable documents first),
store each batch id at once, poll, map results back by custom_id; batches left by a dead process
are collected, and one the API no longer knows (404) is abandoned and its chunks regenerated.

A batch's manifest (custom_id -> how to map its result back) is stored as JSON in the store, so
its entries stay plain dicts.
"""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from typing import TYPE_CHECKING, Any

from contextual_retrieval_core.generators.base import Generation, GenerationError, TokenUsage
from contextual_retrieval_core.generators.usage import UsageReport
from contextual_retrieval_core.types import Chunk

if TYPE_CHECKING:  # pragma: no cover - typing only
    from contextual_retrieval_core.contextualize._run import DocState, Run, RunSettings

__all__ = ["BatchRunner"]


class BatchRunner:
    """Message Batches: submit, persist the batch ids, poll, map results back by custom_id."""

    def __init__(self, settings: RunSettings, run: Run | None, report: UsageReport) -> None:
        self.settings, self.run_state, self.report = settings, run, report
        self.gen: Any = settings.generator
        self.states: dict[str, DocState] = {}
        self.chunks: dict[str, Chunk] = {}
        self.fallbacks: list[tuple[DocState, Chunk]] = []

    def run(self, states: dict[str, DocState]) -> None:
        """Submit `states`' chunks as Message Batches (each document claimed whole first), then
        collect them, storing each context as it is read."""
        assert self.run_state is not None
        for state in states.values():  # a batch is submitted whole: claim it whole first
            self.run_state.take_claims(state)
        states = {d: s for d, s in states.items() if s.todo}
        run = self.run_state
        assert run is not None
        self.states = states
        warm: list[tuple[str, dict, dict]] = []
        rest: list[tuple[str, dict, dict]] = []
        for state in states.values():
            doc = state.document
            for chunk in state.todo:
                self.chunks[chunk.id] = chunk
            if self.settings.config.grouped and run.below_minimum(state):
                params, marked = self.gen.build_group_request(doc, state.todo)
                by_pos = {str(i): c for i, c in enumerate(state.todo)}
                if marked:
                    items = {m: {"key": run.grouped_keys[by_pos[m].id], "chunk_id": by_pos[m].id} for m in marked}
                    cid = "g" + hashlib.sha256(json.dumps(sorted(i["key"] for i in items.values())).encode()).hexdigest()[:63]
                    warm.append((cid, params, {"kind": "group", "doc_id": doc.id, "items": items}))
                unmarked = [c for i, c in enumerate(state.todo) if str(i) not in set(marked)]
                for chunk in unmarked:
                    warm.append(self._chunk_request(state, chunk, first=False))
            elif state.cacheable is not False:
                warm.append(self._chunk_request(state, state.todo[0], first=True))
                rest.extend(self._chunk_request(state, c, first=False) for c in state.todo[1:])
            else:
                warm.extend(self._chunk_request(state, c, first=False) for c in state.todo)
        for phase in (warm, rest):
            if phase and run.fatal is None:
                self._submit_and_collect(phase)
        for state, chunk in self.fallbacks:
            if run.fatal is not None:
                break
            try:
                run.record(state, chunk, self.gen.generate(state.document, chunk), first=False)
            except GenerationError as exc:
                run.fail(chunk, exc)

    def _chunk_request(self, state: DocState, chunk: Chunk, *, first: bool) -> tuple[str, dict, dict]:
        run = self.run_state
        assert run is not None
        key = run.keys[chunk.id]
        # a batch may take far longer than 5 minutes: its cache breakpoints use the 1-hour TTL
        request = self.gen.build_request(state.document, chunk, cache_ttl="1h")
        entry = {"kind": "chunk", "key": key, "chunk_id": chunk.id, "doc_id": state.document.id,
                 "index": chunk.index, "first": first, "windowed": request.windowed}
        return key, request.params, entry

    def _submit_and_collect(self, items: list[tuple[str, dict, dict]]) -> None:
        batches = self.gen.batch_client()
        groups: list[list[tuple[str, dict, dict]]] = [[]]
        size = 0
        for item in items:
            item_size = len(json.dumps({"custom_id": item[0], "params": item[1]}).encode("utf-8"))
            if groups[-1] and (len(groups[-1]) >= self.settings.config.batch_max_requests or size + item_size > self.settings.config.batch_max_bytes):
                groups.append([])
                size = 0
            groups[-1].append(item)
            size += item_size
        submitted = []
        for group in groups:
            try:
                batch = batches.create(requests=[{"custom_id": cid, "params": params} for cid, params, _ in group])
            except Exception as exc:
                raise _batch_error(exc) from exc
            manifest = {cid: entry for cid, _, entry in group}
            self.settings.store.add_batch(batch.id, generator=self.gen.name, model=self.gen.model, manifest=manifest)
            submitted.append((batch.id, manifest))
        for batch_id, manifest in submitted:
            self.collect(batch_id, manifest)

    def collect(self, batch_id: str, manifest: dict[str, dict]) -> None:
        """Wait for a batch to end, store every context it made, mark it collected."""
        batches = self.gen.batch_client()
        try:
            while True:
                status = batches.retrieve(batch_id)
                if status.processing_status == "ended":
                    break
                time.sleep(self.settings.config.batch_poll_interval)
            results = list(batches.results(batch_id))
        except Exception as exc:
            if getattr(exc, "status_code", None) != 404:
                raise _batch_error(exc) from exc
            self._abandon(batch_id, manifest, exc)
            return
        seen: set[str] = set()
        for entry_result in results:
            entry = manifest.get(entry_result.custom_id)
            if entry is None:
                continue
            seen.add(entry_result.custom_id)
            result = entry_result.result
            if result.type != "succeeded":
                self._missed(entry)
                continue
            try:
                text, usage = self.gen.parse_message(result.message)
            except GenerationError:
                self._missed(entry)
                continue
            self._store(entry, text, usage)
        for cid, entry in manifest.items():
            if cid not in seen:
                self._missed(entry)
        self.settings.store.finish_batch(batch_id)

    def _abandon(self, batch_id: str, manifest: dict[str, dict], exc: Exception) -> None:
        """The API does not know the batch (or its results): mark it abandoned, say so, and
        regenerate its chunks (this run's fall back to requests; an earlier run's are not in the
        store, so the run that follows generates them)."""
        self.settings.store.abandon_batch(batch_id)
        self.report.abandoned_batches.append(batch_id)
        warnings.warn(
            f"Message Batch {batch_id} is unknown to the API (404: {getattr(exc, 'message', exc)}); it is marked "
            f"abandoned in {self.settings.store.path} and its {len(manifest)} requests are generated again",
            UserWarning,
            stacklevel=2,
        )
        for entry in manifest.values():
            self._missed(entry)

    def _store(self, entry: dict, text: str, usage: TokenUsage) -> None:
        store, gen, run = self.settings.store, self.gen, self.run_state
        if entry["kind"] == "chunk":
            if run is not None and entry["chunk_id"] in self.chunks:
                state = self.states[entry["doc_id"]]
                run.record(state, self.chunks[entry["chunk_id"]], Generation(text, usage, entry.get("windowed", False)), first=entry["first"])
            else:
                store.put(entry["key"], text, generator=gen.name, model=gen.model, doc_id=entry["doc_id"],
                          chunk_id=entry["chunk_id"], original_index=entry.get("index"), usage=usage.to_dict())
            return
        found = gen.parse_group(text, entry["items"])
        group_state = self.states.get(entry["doc_id"]) if run is not None else None
        if run is not None and group_state is not None:
            run.report.grouped_requests += 1
            run.account(group_state, usage, first=True)
        for marked, item in entry["items"].items():
            context = found.get(marked)
            if context is None:
                self._missed({"kind": "chunk", "key": item["key"], "chunk_id": item["chunk_id"], "doc_id": entry["doc_id"]})
                continue
            if run is not None and group_state is not None and item["chunk_id"] in self.chunks:
                run.record(group_state, self.chunks[item["chunk_id"]], Generation(context, TokenUsage()), first=True, grouped=True)
            else:
                store.put(item["key"], context, generator=gen.name, model=gen.model, doc_id=entry["doc_id"],
                          chunk_id=item["chunk_id"], usage=None)

    def _missed(self, entry: dict) -> None:
        run = self.run_state
        if run is None or entry.get("kind") == "group":
            if run is not None:
                for item in entry["items"].values():
                    self._missed({"kind": "chunk", "chunk_id": item["chunk_id"], "doc_id": entry["doc_id"]})
            return
        chunk = self.chunks.get(entry["chunk_id"])
        if chunk is not None:
            if entry.get("key") == run.grouped_keys.get(chunk.id):
                run.report.grouped_fallbacks += 1
            self.fallbacks.append((self.states[entry["doc_id"]], chunk))


def _batch_error(exc: Exception) -> Exception:
    from contextual_retrieval_core.generators.anthropic import _translate

    try:
        import anthropic
    except ImportError:  # pragma: no cover
        return GenerationError(str(exc))
    return _translate(exc, anthropic)
