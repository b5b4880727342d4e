"""The situating prompt: Anthropic's cookbook prompt, split into a cached and an uncached block.

The document block (the whole document, plus an optional domain glossary) is the same for every
chunk of a document, so it is sent as one content block marked for prompt caching; the chunk block
follows as a second, uncached block. Joined with "\\n" the two blocks are exactly the cookbook's
prompt.

Placeholders are filled with `str.replace`, never `str.format`, so braces in documents (code,
JSON, LaTeX) are rendered intact.

Example:
    >>> doc = DEFAULT_PROMPT.render_document("fn main() { println!(\\"{}\\", 1); }")
    >>> print(doc)
    <document>
    fn main() { println!("{}", 1); }
    </document>
    >>> print(DEFAULT_PROMPT.render_chunk("println!").splitlines()[:3])
    ['Here is the chunk we want to situate within the whole document', '<chunk>', 'println!']
    >>> len(DEFAULT_PROMPT.identity)
    64
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from contextual_retrieval_core.errors import InputError, InputTypeError

__all__ = [
    "DEFAULT_DOCUMENT_PROMPT",
    "DEFAULT_CHUNK_PROMPT",
    "ContextPrompt",
    "DEFAULT_PROMPT",
    "DOC_PLACEHOLDER",
    "CHUNK_PLACEHOLDER",
]

DOC_PLACEHOLDER = "{doc_content}"
CHUNK_PLACEHOLDER = "{chunk_content}"

DEFAULT_DOCUMENT_PROMPT = "<document>\n{doc_content}\n</document>"

DEFAULT_CHUNK_PROMPT = (
    "Here is the chunk we want to situate within the whole document\n"
    "<chunk>\n"
    "{chunk_content}\n"
    "</chunk>\n"
    "Please give a short succinct context to situate this chunk within the overall document for "
    "the purposes of improving search retrieval of the chunk.\n"
    "Answer only with the succinct context and nothing else."
)


@dataclass(frozen=True)
class ContextPrompt:
    """A situating prompt: a document template (cached block) and a chunk template.

    Args:
        document_template: must contain ``{doc_content}``.
        chunk_template: must contain ``{chunk_content}``.
        glossary: optional domain glossary; when set it is appended to the document block as
            ``"\\n<glossary>\\n...\\n</glossary>"``, so it is cached together with the document.
        name: a label for logs and reports; not part of `identity`.
    """

    document_template: str
    chunk_template: str
    glossary: str | None = None
    name: str = "cookbook"

    def __post_init__(self) -> None:
        for field_name, template, placeholder in (
            ("document_template", self.document_template, DOC_PLACEHOLDER),
            ("chunk_template", self.chunk_template, CHUNK_PLACEHOLDER),
        ):
            if not isinstance(template, str):
                raise InputTypeError(f"{field_name} must be str, got {type(template).__name__}")
            if placeholder not in template:
                raise InputError(
                    f"{field_name} must contain the placeholder {placeholder}; got {template!r}"
                )
        if self.glossary is not None and not isinstance(self.glossary, str):
            raise InputTypeError(f"glossary must be str or None, got {type(self.glossary).__name__}")

    def render_document(self, doc_text: str) -> str:
        """The document block (with the glossary, when set): the cacheable part of the prompt."""
        block = self.document_template.replace(DOC_PLACEHOLDER, doc_text)
        if self.glossary:
            block += "\n<glossary>\n" + self.glossary + "\n</glossary>"
        return block

    def render_chunk(self, chunk_text: str) -> str:
        """The chunk block: the per-chunk, uncached part of the prompt."""
        return self.chunk_template.replace(CHUNK_PLACEHOLDER, chunk_text)

    @property
    def identity(self) -> str:
        """sha256 hex of the templates and glossary; part of the context-store key."""
        h = hashlib.sha256(b"contextual-retrieval/prompt/v1")
        for part in (self.document_template, self.chunk_template, self.glossary or ""):
            data = part.encode("utf-8", "surrogatepass")
            h.update(len(data).to_bytes(8, "big"))
            h.update(data)
        return h.hexdigest()


DEFAULT_PROMPT = ContextPrompt(DEFAULT_DOCUMENT_PROMPT, DEFAULT_CHUNK_PROMPT)
