"""The situating prompt: cookbook text, block split, glossary, identity, brace safety."""

from __future__ import annotations

import pytest

from contextual_retrieval_core.generators.prompts import (
    DEFAULT_CHUNK_PROMPT,
    DEFAULT_DOCUMENT_PROMPT,
    DEFAULT_PROMPT,
    ContextPrompt,
)

COOKBOOK_PROMPT = """<document>
{doc_content}
</document>
Here is the chunk we want to situate within the whole document
<chunk>
{chunk_content}
</chunk>
Please give a short succinct context to situate this chunk within the overall document for the purposes of improving search retrieval of the chunk.
Answer only with the succinct context and nothing else."""


def test_blocks_joined_equal_the_cookbook_prompt():
    doc, chunk = "The whole annual report.\nLine two.", "Revenue grew by 3%."
    joined = DEFAULT_PROMPT.render_document(doc) + "\n" + DEFAULT_PROMPT.render_chunk(chunk)
    assert joined == COOKBOOK_PROMPT.format(doc_content=doc, chunk_content=chunk)
    assert DEFAULT_DOCUMENT_PROMPT == "<document>\n{doc_content}\n</document>"
    assert DEFAULT_CHUNK_PROMPT.startswith(
        "Here is the chunk we want to situate within the whole document\n<chunk>\n{chunk_content}\n</chunk>\nPlease give "
    )
    assert DEFAULT_PROMPT.name == "cookbook" and DEFAULT_PROMPT.glossary is None


def test_braces_in_code_are_rendered_intact():
    rust = 'fn main() {\n    let v = vec![1, 2];\n    println!("{} {:?} {doc_content}", v.len(), v);\n}'
    doc = DEFAULT_PROMPT.render_document(rust)
    assert doc == "<document>\n" + rust + "\n</document>"
    chunk = DEFAULT_PROMPT.render_chunk('println!("{}", x); {chunk_content}')
    assert '<chunk>\nprintln!("{}", x); {chunk_content}\n</chunk>' in chunk


def test_glossary_goes_into_the_document_block():
    p = ContextPrompt(DEFAULT_DOCUMENT_PROMPT, DEFAULT_CHUNK_PROMPT, glossary="ARR: annual recurring revenue")
    assert p.render_document("D") == (
        "<document>\nD\n</document>\n<glossary>\nARR: annual recurring revenue\n</glossary>"
    )
    assert p.render_chunk("C") == DEFAULT_PROMPT.render_chunk("C")
    assert p.identity != DEFAULT_PROMPT.identity


def test_identity_tracks_templates_and_glossary_not_name():
    same = ContextPrompt(DEFAULT_DOCUMENT_PROMPT, DEFAULT_CHUNK_PROMPT, name="other")
    assert same.identity == DEFAULT_PROMPT.identity
    assert len(DEFAULT_PROMPT.identity) == 64
    changed = ContextPrompt(DEFAULT_DOCUMENT_PROMPT, DEFAULT_CHUNK_PROMPT + " Be brief.")
    assert changed.identity != DEFAULT_PROMPT.identity
    # framing: moving text between the two templates changes the identity
    a = ContextPrompt("{doc_content}x", "{chunk_content}")
    b = ContextPrompt("{doc_content}", "x{chunk_content}")
    assert a.identity != b.identity


def test_placeholder_validation():
    with pytest.raises(ValueError, match=r"document_template.*\{doc_content\}"):
        ContextPrompt("<document>{content}</document>", DEFAULT_CHUNK_PROMPT)
    with pytest.raises(ValueError, match=r"chunk_template.*\{chunk_content\}"):
        ContextPrompt(DEFAULT_DOCUMENT_PROMPT, "<chunk>{chunk}</chunk>")
    with pytest.raises(TypeError):
        ContextPrompt(DEFAULT_DOCUMENT_PROMPT, DEFAULT_CHUNK_PROMPT, glossary=3)  # type: ignore[arg-type]


def test_frozen():
    with pytest.raises(AttributeError):  # a frozen dataclass: FrozenInstanceError
        DEFAULT_PROMPT.glossary = "x"  # type: ignore[misc]
