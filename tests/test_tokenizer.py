from __future__ import annotations

import pytest

from contextual_retrieval.tokenizer import Tokenizer, TokenizerConfig


def test_splits_camel_and_snake_and_keeps_whole_identifier():
    terms = Tokenizer().tokenize("DiffExecutor run_target")
    assert terms == ["diff", "executor", "diffexecutor", "run", "target", "run_target"]


def test_acronyms_and_digits():
    terms = Tokenizer(stemmer=None).tokenize("HTTPServer2 parseJSON")
    assert terms == ["http", "server", "2", "httpserver2", "parse", "json", "parsejson"]


def test_lowercase_stopwords_stemming():
    terms = Tokenizer().tokenize("The Executors are running the tests")
    assert terms == ["executor", "run", "test"]


def test_identifier_splitting_can_be_switched_off():
    assert Tokenizer(split_identifiers=False, stemmer=None).tokenize("DiffExecutor") == ["diffexecutor"]
    assert Tokenizer(keep_identifiers=False, stemmer=None).tokenize("DiffExecutor") == ["diff", "executor"]


def test_chinese_and_japanese_become_bigrams():
    t = Tokenizer()
    assert t.tokenize("信息检索") == ["信息", "息检", "检索"]
    assert t.tokenize("検索") == ["検索"]
    assert "テキ" in t.tokenize("日本語のテキスト")
    # mixed script: latin part is a word, CJK part bigrams
    assert t.tokenize("BM25检索") == ["bm", "25", "bm25", "检索"]


def test_single_cjk_character_is_kept():
    assert Tokenizer().tokenize("中") == ["中"]


def test_config_round_trip_and_unknown_keys():
    cfg = TokenizerConfig(stemmer=None, stopwords=["foo"], min_token_length=2)
    assert TokenizerConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="upgrade"):
        TokenizerConfig.from_dict({**cfg.to_dict(), "future_setting": 1})


def test_bad_settings_and_input():
    with pytest.raises(ValueError, match="stemmer"):
        Tokenizer(stemmer="klingon")
    with pytest.raises(ValueError, match="stopwords"):
        Tokenizer(stopwords="fr-ish")
    with pytest.raises(TypeError, match="decode"):
        Tokenizer().tokenize(b"\xff\xfe bytes")
    assert Tokenizer().tokenize("") == []
    assert Tokenizer().tokenize("the of and") == []


def test_min_token_length():
    assert Tokenizer(min_token_length=2, stemmer=None).tokenize("x = foo(y)") == ["foo"]
