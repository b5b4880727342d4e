"""Non-text payloads in text files: base64 images, audio and attachments, replaced by a short
placeholder before a file is chunked.

A notebook's image output or a Markdown ``data:`` image is tens of kilobytes of base64: no one
searches for it, it would be hundreds of chunks (each a context request and an embedding), and it
crowds the text around it out of the results. `omit_payloads` replaces each one in the document's
text itself, so that the document and its chunks agree (every chunk occurs verbatim in its
document) and only the payload's kind and size remain:

- in a notebook (``.ipynb``), the base64 value of an output's or attachment's binary MIME type
  (``"image/png": "iVBOR..."``, as one string or a list of lines) becomes the JSON string
  ``"[image/png, 74 KB base64 omitted]"``; the line breaks of a list of lines are kept after it,
  so every other line keeps its number;
- in any file, a ``data:<type>;base64,...`` URI (a Markdown or HTML image, a CSS font) becomes
  ``[image/png, 74 KB base64 omitted]``.

Payloads shorter than `MIN_PAYLOAD_CHARS` base64 characters (an icon) are left as they are. The
index counts what it replaced (`IndexReport.payloads_omitted`).

Example:
    >>> text, found = omit_payloads("See ![plot](data:image/png;base64," + "iVBORw0KGgo" * 700 + ").", "a.md")
    >>> text
    'See ![plot]([image/png, 8 KB base64 omitted]).'
    >>> [(p.mime, p.chars) for p in found]
    [('image/png', 7700)]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Payload", "omit_payloads", "placeholder", "MIN_PAYLOAD_CHARS"]

#: Base64 payloads with fewer characters than this are kept (a small icon, a short token).
MIN_PAYLOAD_CHARS = 128

_B64 = r"(?:[A-Za-z0-9+/=]|\\n|\\/)*"  # a JSON string's base64 characters, with escaped newlines
_NOTEBOOK_PAYLOAD = re.compile(
    r'"(?P<mime>(?:image|audio|video|font|application)/[A-Za-z0-9.+-]+)"(?P<colon>\s*:\s*)'
    rf'(?P<value>"{_B64}"|\[\s*"{_B64}"(?:\s*,\s*"{_B64}")*\s*\])'
)
_DATA_URI = re.compile(r"data:(?P<mime>[\w.+-]+/[\w.+-]+)(?:;[\w.+-]+=[\w.+-]+)*;base64,(?P<data>[A-Za-z0-9+/]+={0,2})")
_NOT_BASE64 = re.compile(r'\\n|[\s",\[\]\\]')  # escaped newlines, JSON punctuation, escapes


@dataclass(frozen=True)
class Payload:
    """One payload replaced.

    Attributes:
        mime: its media type ("image/png"); chars: its base64 characters.
    """

    mime: str
    chars: int


def placeholder(mime: str, chars: int) -> str:
    """The text that stands for a payload: ``[image/png, 74 KB base64 omitted]``."""
    size = f"{chars} B" if chars < 1000 else f"{round(chars / 1000)} KB" if chars < 1_000_000 else f"{chars / 1e6:.1f} MB"
    return f"[{mime}, {size} base64 omitted]"


def omit_payloads(text: str, path: object = None) -> tuple[str, list[Payload]]:
    """`text` with its base64 payloads replaced by `placeholder` (notebook outputs and attachments
    when `path` ends in ``.ipynb``; ``data:`` URIs in any text), and the payloads replaced, in
    order. Linear in the text's size; a text without payloads is returned as it is."""
    found: list[Payload] = []
    if str(path or "").lower().endswith(".ipynb"):
        text = _NOTEBOOK_PAYLOAD.sub(lambda m: _notebook_value(m, found), text)
    if "base64," in text:
        text = _DATA_URI.sub(lambda m: _data_uri(m, found), text)
    return text, found


def _notebook_value(m: re.Match[str], found: list[Payload]) -> str:
    value = m.group("value")
    chars = len(_NOT_BASE64.sub("", value))
    if chars < MIN_PAYLOAD_CHARS:
        return m.group()
    found.append(Payload(m.group("mime"), chars))
    breaks = "\n" * value.count("\n")  # raw line breaks (between a list's lines): kept
    return f'"{m.group("mime")}"{m.group("colon")}"{placeholder(m.group("mime"), chars)}"{breaks}'


def _data_uri(m: re.Match[str], found: list[Payload]) -> str:
    chars = len(m.group("data"))
    if chars < MIN_PAYLOAD_CHARS:
        return m.group()
    found.append(Payload(m.group("mime"), chars))
    return placeholder(m.group("mime"), chars)
