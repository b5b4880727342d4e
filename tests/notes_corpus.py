"""The small notes corpus the index tests share: a folder of three files (`make_corpus`), the change
they make to it (`change_corpus`), a deterministic bag-of-words embedder and a non-LLM generator
that count what they are asked for, and a digest of a folder's files (`folder_digest`)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np

from contextual_retrieval_core.generators.base import Generation, TokenUsage


class CountingEmbedder:
    """Hashed bag of words, L2-normalised; counts the texts it embeds."""

    normalized = True

    def __init__(self, model_name: str = "toy-bow-64") -> None:
        self.model_name = model_name
        self.documents: list[str] = []
        self.queries: list[str] = []

    def _vec(self, texts):
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()):
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 64] += 1.0
        return out / np.clip(np.linalg.norm(out, axis=1, keepdims=True), 1e-9, None)

    def embed_documents(self, texts):
        self.documents.extend(texts)
        return self._vec(texts)

    def embed_queries(self, texts):
        self.queries.extend(texts)
        return self._vec(texts)

    async def aembed_documents(self, texts):
        return self.embed_documents(texts)

    async def aembed_queries(self, texts):
        return self.embed_queries(texts)


class CountingGenerator:
    """A non-LLM generator that records every chunk it situates."""

    name = "counting"
    model = ""
    prompt_identity = "counting-v1"
    is_llm = False

    def __init__(self) -> None:
        self.calls: list[str] = []

    def generate(self, document, chunk):
        self.calls.append(chunk.id)
        return Generation(f"Situated in {document.id}.", TokenUsage())

    async def agenerate(self, document, chunk):
        return self.generate(document, chunk)


def make_corpus(root: Path) -> Path:
    folder = root / "notes"
    (folder / "sub").mkdir(parents=True)
    (folder / "billing.md").write_text(
        "# Billing\n\n## Refunds\n\nRefunds are issued within 14 days of a written request.\n\n"
        "## Invoices\n\nInvoices are sent on the first working day of each month.\n", encoding="utf-8")
    (folder / "sub" / "cache.py").write_text(
        "class LruCache:\n    def evict(self):\n        return self.items.popitem(last=False)\n", encoding="utf-8")
    (folder / "readme.txt").write_text("Kubernetes deployment notes: scale the worker pool to five replicas.\n",
                                       encoding="utf-8")
    return folder


def folder_digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def change_corpus(folder: Path) -> None:
    (folder / "billing.md").write_text(
        "# Billing\n\n## Refunds\n\nRefunds are issued within 30 days of a written request.\n", encoding="utf-8")
    (folder / "readme.txt").unlink()
    (folder / "faq.md").write_text("# FAQ\n\nThe office opens at nine.\n", encoding="utf-8")
