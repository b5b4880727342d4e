"""Griffe extension for the API pages: a docstring's ``Example:`` section is read as ``Examples:``.

The code's docstrings head their doctests ``Example:`` (the Google style guide's spelling); griffe
parses only ``Examples:`` into code blocks, and would otherwise render the doctest lines as
Markdown prose. Nothing else in the docstring changes, and the doctests still run under pytest.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_HEADING = re.compile(r"^(\s*)Example:\s*$", re.M)


class ExampleSections(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        docstring = obj.docstring
        if docstring is not None and "Example:" in docstring.value:
            docstring.value = _HEADING.sub(r"\1Examples:", docstring.value)
