"""The docs site's shape: every page is in the navigation and every navigation entry is a page
(or one the build serves from elsewhere in the repository), no page is a stub, and the API pages
are generated from the docstrings rather than copied. `mkdocs build --strict` itself runs in
`.ci/run`; the code blocks run in tests/integration/test_docs_snippets.py."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
DOCS = REPO / "docs"
SERVED = {"results.md": REPO / "benchmarks" / "RESULTS.md", "changelog.md": REPO / "CHANGELOG.md"}


class _Loader(yaml.SafeLoader):
    """mkdocs.yml may carry mkdocs' own tags (!ENV, !relative); their values do not matter here."""


_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)


def nav_pages() -> list[str]:
    config = yaml.load((REPO / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_Loader)
    pages: list[str] = []

    def walk(entry: object) -> None:
        if isinstance(entry, str):
            pages.append(entry)
        elif isinstance(entry, dict):
            for value in entry.values():
                walk(value)
        elif isinstance(entry, list):
            for item in entry:
                walk(item)

    walk(config["nav"])
    return pages


def prose_words(markdown: str) -> int:
    without_code = re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M)
    return len(re.findall(r"[A-Za-z]{2,}", without_code))


def test_every_page_is_in_the_navigation_and_every_entry_exists():
    pages = nav_pages()
    on_disk = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert set(pages) == on_disk | set(SERVED)
    assert len(pages) == len(set(pages))
    assert all(source.is_file() for source in SERVED.values())


def test_no_page_is_a_stub():
    for page in nav_pages():
        path = SERVED.get(page, DOCS / page)
        text = path.read_text(encoding="utf-8")
        assert re.search(r"^# \S", text, re.M), f"{page}: no title"
        if page.startswith("api/"):
            continue
        assert prose_words(text) >= 80, f"{page}: {prose_words(text)} words of prose"


def test_api_pages_are_generated_from_the_docstrings():
    for package in ("core", "llamaindex", "langchain"):
        text = (DOCS / "api" / f"{package}.md").read_text(encoding="utf-8")
        assert f"::: contextual_retrieval_{package}" in text
        assert '"""' not in text and "Args:" not in text  # nothing copied out of a docstring


def test_every_test_file_the_docs_and_the_readme_name_exists():
    texts = {p.name: p.read_text(encoding="utf-8") for p in DOCS.rglob("*.md")}
    texts["README.md"] = (REPO / "README.md").read_text(encoding="utf-8")
    named = {(name, path) for name, text in texts.items() for path in re.findall(r"tests/[\w/]+\.py", text)}
    assert named
    assert not [(name, path) for name, path in named if not (REPO / path).is_file()]
