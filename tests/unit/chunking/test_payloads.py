"""Base64 payloads in notebooks and Markdown are replaced by a placeholder before chunking, in the
document's own text (`chunking.payloads`, `index.files.read_source_text`), and counted in the
index report (issue 43, item 4)."""

from __future__ import annotations

import base64
import json
import random
import re
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from contextual_retrieval_core import Document
from contextual_retrieval_core.chunking.budget import window_of
from contextual_retrieval_core.chunking.payloads import MIN_PAYLOAD_CHARS, omit_payloads, placeholder
from contextual_retrieval_core.contextualize.fit import chunk_to_fit
from contextual_retrieval_core.embeddings.minilm import LocalMiniLMEmbedder
from contextual_retrieval_core.index.files import read_source_text
from contextual_retrieval_core.index.report import IndexReport

BASE64_RUN = re.compile(r"[A-Za-z0-9+/]{100,}")


def png(size: int, seed: int = 4) -> str:
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + random.Random(seed).randbytes(size)).decode()


def notebook_text(image: str) -> str:
    """A notebook as Jupyter writes it: a plot's PNG output, an attachment, an inline data: image."""
    nb = new_notebook(cells=[
        new_markdown_cell("# Results\n\nThe loss falls after the warm-up.\n\n![inline](data:image/png;base64," + image[:6000] + ")"),
        new_code_cell("plt.plot(steps, loss)\nplt.show()", outputs=[
            new_output("display_data", data={"image/png": image, "text/plain": "<Figure size 640x480 with 1 Axes>"}),
            new_output("execute_result", data={"text/plain": "0.42", "application/json": {"loss": 0.42}}, execution_count=1),
        ]),
    ])
    nb.cells[0]["attachments"] = {"diagram.png": {"image/png": image[:20_000]}}
    return nbformat.writes(nb)


@pytest.fixture(scope="module")
def notebook(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("nb") / "analysis.ipynb"
    path.write_text(notebook_text(png(75_000)), encoding="utf-8")
    return path


def test_a_notebooks_images_become_placeholders_in_valid_json_with_its_lines_kept(notebook: Path) -> None:
    raw = notebook.read_text(encoding="utf-8")
    text, encoding, payloads = read_source_text(notebook)
    assert encoding == "utf-8"
    assert [(p.mime, p.chars) for p in payloads] == [("image/png", 20_000), ("image/png", 100_012), ("image/png", 6000)]
    assert not BASE64_RUN.search(text)
    assert len(text) < 2_000 < len(raw)
    assert text.count("\n") == raw.count("\n")  # every line keeps its number
    nb = nbformat.reads(text, as_version=4)  # still a notebook
    assert nb.cells[1].outputs[0]["data"]["image/png"] == placeholder("image/png", 100_012) == "[image/png, 100 KB base64 omitted]"
    assert nb.cells[1].outputs[0]["data"]["text/plain"] == "<Figure size 640x480 with 1 Axes>"
    assert nb.cells[1].outputs[1]["data"]["application/json"] == {"loss": 0.42}
    assert "![inline]([image/png, 6 KB base64 omitted])" in nb.cells[0].source


@pytest.mark.parametrize("fit", [False, True], ids=["default", "fitted"])
def test_a_notebooks_chunks_hold_no_base64_and_occur_in_its_document(notebook: Path, fit: bool) -> None:
    text, _, _ = read_source_text(notebook)
    window = window_of(LocalMiniLMEmbedder()) if fit else None
    pieces = chunk_to_fit(Document("analysis.ipynb", text), window, path=str(notebook))
    assert 1 <= len(pieces) <= 4  # as read: 158 (default) or 395 (fitted) chunks of base64
    assert not any(BASE64_RUN.search(p) for _, p in pieces)
    assert all(text[o:o + len(p)] == p for o, p in pieces)  # the document and its chunks agree
    assert any("The loss falls after the warm-up." in p for _, p in pieces)


def test_a_notebook_written_as_lists_of_lines_keeps_its_line_numbers() -> None:
    image = png(3_000)
    lines = [image[i:i + 76] + "\n" for i in range(0, len(image), 76)]
    raw = json.dumps({"cells": [{"cell_type": "code", "source": ["show()\n"], "outputs": [
        {"output_type": "display_data", "data": {"image/jpeg": lines, "text/plain": ["<Figure>"]}}]}]}, indent=1)
    text, payloads = omit_payloads(raw, "old.ipynb")
    assert [(p.mime, p.chars) for p in payloads] == [("image/jpeg", len(image))]
    assert text.count("\n") == raw.count("\n")
    assert json.loads(text)["cells"][0]["outputs"][0]["data"] == {"image/jpeg": "[image/jpeg, 4 KB base64 omitted]",
                                                                  "text/plain": ["<Figure>"]}


def test_markdown_data_uris_are_replaced_and_small_ones_and_other_texts_kept() -> None:
    big, small = png(3_000), png(20)
    assert len(small) < MIN_PAYLOAD_CHARS
    text = (f"# Figures\n\n![plot](data:image/png;base64,{big})\n\n![dot](data:image/png;base64,{small})\n\n"
            f"<img src=\"data:image/svg+xml;charset=utf-8;base64,{big}\">\n")
    out, payloads = omit_payloads(text, "figures.md")
    assert out == ("# Figures\n\n![plot]([image/png, 4 KB base64 omitted])\n\n"
                   f"![dot](data:image/png;base64,{small})\n\n<img src=\"[image/svg+xml, 4 KB base64 omitted]\">\n")
    assert len(payloads) == 2
    plain = "A notebook-like JSON that is not one: " + json.dumps({"image/png": big})
    assert omit_payloads(plain, "data.json") == (plain, [])  # the notebook rule reads .ipynb only
    assert omit_payloads("no payload here", "a.ipynb") == ("no payload here", [])


def test_the_report_counts_omitted_payloads_only_when_there_are_some() -> None:
    report = IndexReport()
    assert "payloads_omitted" not in report.to_dict()
    assert "base64" not in report.format()
    report.payloads_omitted = 3
    assert report.to_dict()["payloads_omitted"] == 3
    assert "3 base64 payloads (notebook images and attachments, data: URIs) replaced by a placeholder" in report.format()
