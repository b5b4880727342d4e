"""StructuralContextGenerator: contexts from titles, heading chains and enclosing code definitions."""

from __future__ import annotations

import asyncio
import random

import pytest

from contextual_retrieval_core import Chunk, Document
from contextual_retrieval_core.generators import ContextGenerator, Generation, StructuralContextGenerator, TokenUsage

GEN = StructuralContextGenerator()


def ctx(doc: Document, chunk_text: str, **chunk_meta) -> str:
    return GEN.generate(doc, Chunk("c", doc.id, chunk_text, metadata=chunk_meta)).context


# -- the protocol ---------------------------------------------------------------------------------


def test_protocol_attributes_and_zero_usage():
    assert isinstance(GEN, ContextGenerator)
    assert GEN.name == "structural" and GEN.model == "" and GEN.is_llm is False
    assert GEN.prompt_identity.startswith("structural-v")
    assert StructuralContextGenerator.label == "structural (no LLM)"
    doc = Document("a.md", "# A\ntext")
    gen = GEN.generate(doc, Chunk("c", "a.md", "text"))
    assert isinstance(gen, Generation) and gen.usage == TokenUsage() and gen.windowed is False


def test_agenerate_equals_generate():
    doc = Document("a.md", "# A\n## B\ntext")
    chunk = Chunk("c", "a.md", "text")
    assert asyncio.run(GEN.agenerate(doc, chunk)) == GEN.generate(doc, chunk)


def test_deterministic_across_instances():
    doc = Document("src/x.py", "class A:\n    def f(self):\n        return 1\n")
    chunk = Chunk("c", doc.id, "return 1")
    assert StructuralContextGenerator().generate(doc, chunk) == StructuralContextGenerator().generate(doc, chunk)


# -- prose ----------------------------------------------------------------------------------------

SETUP_MD = """# Setup

Intro to the setup.

## Requirements

Python 3.10 or later.

## Installation

```bash
# not a heading: a comment in a code block
pip install contextual-retrieval
```

### Linux

Run `make install` as root.

### Windows

Use the installer.

# Usage

Call the API.
"""


def test_markdown_nested_headings():
    doc = Document("docs/setup.md", SETUP_MD)
    assert ctx(doc, "Run `make install` as root.") == "From docs/setup.md, section: Setup > Installation > Linux."
    assert ctx(doc, "Use the installer.") == "From docs/setup.md, section: Setup > Installation > Windows."
    assert ctx(doc, "Python 3.10 or later.") == "From docs/setup.md, section: Setup > Requirements."
    # a deeper heading is dropped when a higher one follows
    assert ctx(doc, "Call the API.") == "From docs/setup.md, section: Usage."


def test_markdown_heading_in_code_block_is_ignored():
    doc = Document("docs/setup.md", SETUP_MD)
    assert ctx(doc, "pip install contextual-retrieval") == "From docs/setup.md, section: Setup > Installation."


def test_chunk_starting_with_heading_includes_it():
    doc = Document("docs/setup.md", SETUP_MD)
    assert ctx(doc, "### Linux\n\nRun `make install`") == "From docs/setup.md, section: Setup > Installation > Linux."


def test_title_from_first_heading_is_not_repeated():
    doc = Document("setup-guide", SETUP_MD)  # no metadata, id is not a path
    assert ctx(doc, "Run `make install` as root.") == 'From "Setup", section: Installation > Linux.'
    assert ctx(doc, "Intro to the setup.") == 'From "Setup".'


def test_setext_headings():
    text = "User Guide\n==========\n\nWelcome.\n\nInstalling\n----------\n\nRun the script.\n\n---\n\nAfter a rule.\n"
    doc = Document("guide.md", text)
    assert ctx(doc, "Run the script.") == "From guide.md, section: User Guide > Installing."
    assert ctx(doc, "Welcome.") == "From guide.md, section: User Guide."
    # `---` after a blank line is a thematic break, not a heading
    assert ctx(doc, "After a rule.") == "From guide.md, section: User Guide > Installing."


def test_restructuredtext_adornments():
    text = (
        "=========\nProject X\n=========\n\nOverview\n========\n\nSome text.\n\n"
        "Details\n-------\n\nDeep\n~~~~\n\nDeep text.\n"
    )
    doc = Document("docs/index.rst", text)
    assert ctx(doc, "Deep text.") == "From docs/index.rst, section: Project X > Overview > Details > Deep."
    assert ctx(doc, "Some text.") == "From docs/index.rst, section: Project X > Overview."


def test_front_matter_title_and_headings():
    text = "---\ntitle: Release notes\ndate: 2024-01-01\n---\n\n## Version 2\n\nFaster.\n"
    doc = Document("notes", text)
    assert ctx(doc, "Faster.") == 'From "Release notes", section: Version 2.'


def test_metadata_title_wins_and_is_quoted():
    doc = Document("doc-7", SETUP_MD, metadata={"title": "Setup Guide", "file_path": "docs/setup.md"})
    assert ctx(doc, "Use the installer.") == 'From "Setup Guide", section: Setup > Installation > Windows.'


@pytest.mark.parametrize("key", ["file_path", "path", "source", "filename"])
def test_metadata_path_keys(key):
    doc = Document("doc-7", SETUP_MD, metadata={key: "docs/setup.md"})
    assert ctx(doc, "Use the installer.") == "From docs/setup.md, section: Setup > Installation > Windows."


def test_first_short_line_as_title_else_id():
    doc = Document("memo-1", "Quarterly memo\n\nRevenue grew by 3%.\n")
    assert ctx(doc, "Revenue grew by 3%.") == 'From "Quarterly memo".'
    long_line = "word " * 30
    doc = Document("memo-2", long_line + "\n\nRevenue grew by 3%.\n")
    assert ctx(doc, "Revenue grew by 3%.") == "From memo-2."


def test_chunk_not_in_document_falls_back_to_title():
    doc = Document("docs/setup.md", SETUP_MD)
    chunk = Chunk("c", doc.id, "This sentence is nowhere in the document.")
    assert GEN.generate(doc, chunk).context == "From docs/setup.md."
    info = GEN.analyze(doc, chunk)
    assert info.located is False and info.position is None and info.sections == ()


def test_whitespace_normalised_chunk_is_located():
    doc = Document("docs/setup.md", SETUP_MD)
    # a splitter that collapsed the newlines
    assert ctx(doc, "### Windows Use the installer.") == "From docs/setup.md, section: Setup > Installation > Windows."


def test_chunk_offset_metadata_disambiguates_repeated_text():
    text = "# A\n\nSee below.\n\n# B\n\nSee below.\n"
    doc = Document("r.md", text)
    assert ctx(doc, "See below.") == "From r.md, section: A."
    second = text.rindex("See below.")
    assert ctx(doc, "See below.", start_index=second) == "From r.md, section: B."
    assert ctx(doc, "See below.", start_char_idx=second) == "From r.md, section: B."
    # a wrong offset is ignored
    assert ctx(doc, "See below.", start_index=1) == "From r.md, section: A."


def test_empty_document_and_empty_chunk():
    doc = Document("empty-doc", "")
    assert ctx(doc, "anything") == "From empty-doc."
    assert ctx(doc, "") == "From empty-doc."
    doc = Document("x.md", "# T\nbody")
    assert ctx(doc, "   ") == "From x.md."


def test_cjk_text():
    text = "# 用户指南\n\n## 安装\n\n### 在 Linux 上安装\n\n运行安装脚本即可完成安装。\n\n## 配置\n\n编辑配置文件。\n"
    doc = Document("指南", text)
    assert ctx(doc, "运行安装脚本即可完成安装。") == 'From "用户指南", section: 安装 > 在 Linux 上安装.'
    assert ctx(doc, "编辑配置文件。") == 'From "用户指南", section: 配置.'
    plain = Document("cjk-plain", "信息检索是从大量文档中找到相关信息的过程。\n向量数据库存储嵌入向量。")
    assert ctx(plain, "向量数据库存储嵌入向量。") == 'From "信息检索是从大量文档中找到相关信息的过程".'


def test_long_chains_stay_short():
    text = "".join(f"{'#' * level} Heading number {level} with several words in it\n" for level in range(1, 7))
    doc = Document("deep.md", text + "body text")
    out = ctx(doc, "body text")
    assert len(out.split()) <= 60
    assert out.startswith("From deep.md, section: … > ")


# -- code -----------------------------------------------------------------------------------------

PY = '''"""Service layer."""

import os


class Service:
    """Runs jobs."""

    def __init__(self, root):
        self.root = root

    def run(
        self,
        job,
    ) -> int:
        text = """
a multi-line string
def not_a_function():
"""
        return len(text) + job


def helper(x):
    return x * 2


def other(y):
    return y + 1
'''


def test_python_chunk_inside_method():
    doc = Document("app/service.py", PY)
    assert ctx(doc, "return len(text) + job") == "From app/service.py, in class Service > def run."
    assert ctx(doc, "self.root = root") == "From app/service.py, in class Service > def __init__."


def test_python_chunk_defining_two_functions():
    doc = Document("app/service.py", PY)
    chunk = "def helper(x):\n    return x * 2\n\n\ndef other(y):\n    return y + 1\n"
    assert ctx(doc, chunk) == "From app/service.py; defines: helper, other."


def test_python_chunk_defining_a_class_qualifies_methods():
    doc = Document("app/service.py", PY)
    start = PY.index("class Service")
    chunk = PY[start : PY.index("    def run")]
    assert ctx(doc, chunk) == "From app/service.py; defines: Service, Service.__init__."


def test_python_string_content_is_not_a_definition():
    doc = Document("app/service.py", PY)
    info = GEN.analyze(doc, Chunk("c", doc.id, "def not_a_function():"))
    assert info.scopes == ("class Service", "def run") and info.defines == ()


def test_python_module_docstring_as_title_and_detection_without_extension():
    doc = Document("mod-1", PY)
    info = GEN.analyze(doc, Chunk("c", doc.id, "return x * 2"))
    assert info.kind == "code" and info.language == "python"
    assert GEN.generate(doc, Chunk("c", doc.id, "return x * 2")).context == 'From "Service layer", in def helper.'


RUST = """//! Executor for differential fuzzing.
use core::fmt::Debug;

/// A differential executor.
pub struct DiffExecutor<A, B> {
    primary: A,
    secondary: B,
}

impl<A, B> DiffExecutor<A, B> {
    /// Create a new `DiffExecutor`.
    pub fn new(primary: A, secondary: B) -> Self {
        Self { primary, secondary }
    }

    pub fn run_target(&mut self, input: &[u8]) -> Result<ExitKind, Error>
    where
        A: Executor,
    {
        let c = '{';
        let s = "}}}";
        self.primary.run(input)?;
        self.secondary.run(input)
    }
}

impl<'a, A: Debug, B> Executor for DiffExecutor<A, B> {
    fn observers(&self) -> &'a str {
        match self.kind {
            Kind::A => "a",
            _ => "b",
        }
    }
}
"""


def test_rust_chunk_inside_impl_fn():
    doc = Document("src/executors/differential.rs", RUST)
    assert ctx(doc, "self.primary.run(input)?;") == (
        "From src/executors/differential.rs, in impl DiffExecutor > fn run_target."
    )
    assert ctx(doc, 'Kind::A => "a",') == (
        "From src/executors/differential.rs, in impl Executor for DiffExecutor > fn observers."
    )


def test_rust_definitions_inside_chunk():
    doc = Document("src/executors/differential.rs", RUST)
    start = RUST.index("    /// Create a new")
    end = RUST.index("impl<'a")
    assert ctx(doc, RUST[start:end]) == (
        "From src/executors/differential.rs, in impl DiffExecutor; defines: new, run_target."
    )
    whole_impl = RUST[RUST.index("impl<A, B>"):end]
    assert ctx(doc, whole_impl) == (
        "From src/executors/differential.rs; defines: DiffExecutor::new, DiffExecutor::run_target."
    )


def test_rust_detected_by_content_with_doc_comment_title():
    doc = Document("doc_1", RUST)
    assert ctx(doc, "self.primary.run(input)?;") == (
        'From "Executor for differential fuzzing", in impl DiffExecutor > fn run_target.'
    )


JS = """// Cart utilities
import { api } from './api';

export class Cart extends Base {
  constructor(items = []) {
    super();
    this.items = items;
  }

  async checkout(user) {
    const total = this.items.reduce((a, b) => {
      return a + b.price;
    }, 0);
    return api.post(`/checkout/${user.id}`, { total });
  }
}

export const formatPrice = (value: number): string => {
  return `$${value.toFixed(2)}`;
};

function applyDiscount(total, code) {
  if (code === "HALF") {
    return total / 2;
  }
  return total;
}
"""


def test_js_ts_class_method_arrow_and_function():
    doc = Document("web/src/cart.ts", JS)
    assert ctx(doc, "return a + b.price;") == "From web/src/cart.ts, in class Cart > method checkout."
    assert ctx(doc, "this.items = items;") == "From web/src/cart.ts, in class Cart > method constructor."
    assert ctx(doc, "return `$${value.toFixed(2)}`;") == "From web/src/cart.ts, in function formatPrice."
    assert ctx(doc, "return total / 2;") == "From web/src/cart.ts, in function applyDiscount."
    start = JS.index("export const formatPrice")
    assert ctx(doc, JS[start:]) == "From web/src/cart.ts; defines: formatPrice, applyDiscount."


GO = """package server

// Server serves requests.
type Server struct {
\taddr string
}

func (s *Server) Start(ctx context.Context) error {
\tgo func() {
\t\tlog.Println("started {")
\t}()
\treturn nil
}

func main() {
\tfmt.Println("hi")
}
"""


def test_go_receiver_methods_and_types():
    doc = Document("cmd/server.go", GO)
    assert ctx(doc, "return nil") == "From cmd/server.go, in func Server.Start."
    assert ctx(doc, 'fmt.Println("hi")') == "From cmd/server.go, in func main."
    assert ctx(doc, GO[GO.index("// Server serves"):]) == "From cmd/server.go; defines: Server, Server.Start, main."


JAVA = """/*
 * Copyright 2024 Example Corp.
 * Licensed under the Apache License, Version 2.0.
 */
package com.example;

import java.util.List;

public class OrderService implements Service {
    @Override
    public List<Order> findOrders(String customer) throws IOException {
        for (Order o : repo.all()) {
            if (o.matches(customer)) {
                result.add(o);
            }
        }
        return result;
    }

    private static class Cache {
        void clear() {
            map.clear();
        }
    }
}
"""


def test_java_methods_nested_classes_and_license_is_not_a_title():
    doc = Document("j-1", JAVA)
    assert ctx(doc, "result.add(o);") == "From j-1, in class OrderService > method findOrders."
    assert ctx(doc, "map.clear();") == "From j-1, in class OrderService > class Cache > method clear."


CPP = """#include <vector>

namespace clickhouse {

template <typename T>
class ColumnVector : public Column {
public:
    void Append(const T& value) {
        data_.push_back(value);
    }
};

void ColumnVector::Clear() noexcept {
    data_.clear();
}

}  // namespace clickhouse
"""


def test_cpp_namespace_class_and_out_of_line_method():
    doc = Document("src/columns/vector.cpp", CPP)
    assert ctx(doc, "data_.push_back(value);") == (
        "From src/columns/vector.cpp, in namespace clickhouse > class ColumnVector > method Append."
    )
    assert ctx(doc, "data_.clear();") == (
        "From src/columns/vector.cpp, in namespace clickhouse > function ColumnVector::Clear."
    )


def test_ruby_by_indentation():
    text = "module Billing\n  class Invoice\n    def total\n      items.sum\n    end\n  end\nend\n"
    doc = Document("lib/billing.rb", text)
    assert ctx(doc, "items.sum") == "From lib/billing.rb, in module Billing > class Invoice > def total."


def test_code_chunk_not_found_lists_definitions_of_the_chunk_text():
    doc = Document("app/service.py", PY)
    chunk = Chunk("c", doc.id, "def brand_new(a):\n    return a\n\ndef another(b):\n    return b\n")
    assert GEN.generate(doc, chunk).context == "From app/service.py; defines: brand_new, another."
    assert GEN.analyze(doc, chunk).located is False


def test_language_from_metadata():
    doc = Document("snippet-9", "class A:\n    def f(self):\n        pass\n", metadata={"language": "python"})
    assert GEN.analyze(doc, Chunk("c", doc.id, "pass")).language == "python"


def test_many_definitions_are_capped():
    text = "".join(f"def function_number_{i}(x):\n    return x\n\n" for i in range(30))
    doc = Document("many.py", text)
    out = ctx(doc, text)
    assert "and 22 more" in out and len(out.split()) <= 60


def test_never_raises_on_odd_input():
    rng = random.Random(7)
    alphabet = "{}()[]<>;:=\"'`/*#\n\t abcfnimplstructclassdef->=>|\\~-"
    for ext in ("rs", "py", "js", "go", "cpp", "md", "rst", "rb", "java", ""):
        for _ in range(20):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 400)))
            doc = Document(f"f.{ext}" if ext else "f", text)
            if text:
                a = rng.randint(0, len(text) - 1)
                piece = text[a : a + rng.randint(1, 80)]
            else:
                piece = "x"
            out = ctx(doc, piece)
            assert out.startswith("From ") and out.endswith(".")


def test_outline_cache_is_keyed_on_content():
    gen = StructuralContextGenerator()
    a = Document("same-id.md", "# One\ntext")
    b = Document("same-id.md", "# Two\ntext")
    assert gen.generate(a, Chunk("c", a.id, "text")).context == "From same-id.md, section: One."
    assert gen.generate(b, Chunk("c", b.id, "text")).context == "From same-id.md, section: Two."
