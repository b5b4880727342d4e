from __future__ import annotations

import pytest

from contextual_retrieval_core.chunking.tokenizer import Tokenizer, TokenizerConfig


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


@pytest.mark.parametrize(
    "word",
    [
        "हिन्दी",  # Devanagari: vowel signs and a virama between the consonants
        "مُحَمَّد",  # Arabic with harakat
        "ภาษาไทย",  # Thai: a word (no spaces) with a combining vowel
        "ที่",  # Thai tone mark over a vowel mark
        "தமிழ்",  # Tamil: combining vowel sign and virama
    ],
)
def test_words_with_combining_marks_stay_whole(word):
    import unicodedata

    whole = unicodedata.normalize("NFKC", word)
    assert Tokenizer(stemmer=None).tokenize(word) == [whole]
    assert Tokenizer(stemmer=None).tokenize(f"alpha {word} beta") == ["alpha", whole, "beta"]


def test_combining_marks_join_words_but_do_not_start_them():
    t = Tokenizer(stemmer=None)
    assert t.tokenize("हिन्दी_भाषा") == ["हिन्दी", "भाषा", "हिन्दी_भाषा"]  # snake_case across scripts
    assert t.tokenize("\u0301 x") == ["x"]  # a stray mark after a space is no term of its own


def test_every_combining_mark_is_part_of_a_word():
    import sys
    import unicodedata

    marks = [chr(cp) for cp in range(sys.maxunicode + 1) if unicodedata.category(chr(cp)).startswith("M")]
    settings = dict(stemmer=None, lowercase=False, split_identifiers=False, cjk_bigrams=False)
    v2 = Tokenizer(TokenizerConfig(**settings, version=2))
    words = [unicodedata.normalize("NFKC", "a" + m) for m in marks]
    assert len(marks) > 2000 and [w for w in words if v2.tokenize(w) != [w]] == []
    # version 3 folds the combining diacritical blocks away and keeps every other mark in its word
    v3 = Tokenizer(TokenizerConfig(**settings))
    diacritic = [m for m in marks if any(lo <= ord(m) <= hi for lo, hi in
                                         ((0x300, 0x36F), (0x1AB0, 0x1AFF), (0x1DC0, 0x1DFF), (0x20D0, 0x20FF), (0xFE20, 0xFE2F)))]
    assert len(diacritic) > 200
    assert [m for m in diacritic if v3.tokenize("x" + m) != ["x"]] == []
    others = [m for m in marks if m not in set(diacritic)]
    assert [m for m in others if len(v3.tokenize("x" + m)) != 1 or v3.tokenize("x" + m)[0] == "x"] == []


def test_version_3_folds_accents_and_compatibility_forms():
    t = Tokenizer(stemmer=None)
    assert TokenizerConfig().version == 3
    assert t.tokenize("Café crème à Noël") == t.tokenize("cafe creme a noel") == ["cafe", "creme", "noel"]
    assert t.tokenize("ﬁle Ｈｅｌｌｏ ²") == ["file", "hello", "2"]  # ligature, full-width, superscript
    assert t.tokenize("Ångström naïve façade") == ["angstrom", "naive", "facade"]
    # marks that are not accents stay: kana voicing, Hangul syllables, Devanagari vowel signs
    assert t.tokenize("が") == ["が"] and t.tokenize("한국어") == ["한국어"] and t.tokenize("हिन्दी") == ["हिन्दी"]
    # version 2 (indexes saved before folding) keeps accents distinct
    v2 = Tokenizer(TokenizerConfig(stemmer=None, version=2))
    assert v2.tokenize("café") == ["café"] and v2.tokenize("cafe") == ["cafe"]


def test_bm25_cafe_matches_café_and_a_saved_version_2_index_keeps_its_behaviour(tmp_path):
    from contextual_retrieval_core.search.bm25 import BM25Index

    texts = ["Le café est fermé le lundi.", "Tea is served all day."]
    new = BM25Index().index(["fr", "en"], texts)
    assert [i for i, _ in new.search("cafe ferme", k=2)] == ["fr"]
    old = BM25Index(Tokenizer(TokenizerConfig(version=2))).index(["fr", "en"], texts)
    loaded = BM25Index.load(old.save(tmp_path / "v2"))
    assert loaded.tokenizer.config.version == 2
    assert loaded.search("cafe ferme", k=2) == []  # as it behaved when it was saved
    assert [i for i, _ in loaded.search("café", k=2)] == ["fr"]
    assert BM25Index.load(new.save(tmp_path / "v3")).tokenizer.config.version == 3


def test_version_1_keeps_the_old_splitting_for_indexes_saved_with_it(tmp_path):
    from contextual_retrieval_core.search.bm25 import BM25Index

    old = Tokenizer(TokenizerConfig(stemmer=None, version=1))
    assert old.tokenize("हिन्दी") == ["ह", "न", "द"]
    assert old.tokenize("DiffExecutor run_target") == Tokenizer(stemmer=None).tokenize("DiffExecutor run_target")

    index = BM25Index(old).index(["hi", "en"], ["हिन्दी भाषा", "english text"])
    loaded = BM25Index.load(index.save(tmp_path / "v1"))
    assert loaded.tokenizer.config.version == 1
    assert loaded.tokenizer.tokenize("हिन्दी") == ["ह", "न", "द"]  # queries split as the corpus was
    assert [i for i, _ in loaded.search("हिन्दी", k=2)] == ["hi"]


def test_an_unknown_version_names_the_fix():
    with pytest.raises(ValueError, match="upgrade"):
        Tokenizer(TokenizerConfig(version=99))


def test_the_stored_mark_ranges_of_this_python_are_its_unicode_database():
    import unicodedata

    from contextual_retrieval_core.chunking._unicode_marks import MARK_RANGES, scan_marks

    assert MARK_RANGES[unicodedata.unidata_version] == scan_marks()  # a new Python: add its entry (see the module)


def test_every_stored_mark_table_is_well_formed_ranges_in_order():
    import re

    from contextual_retrieval_core.chunking._unicode_marks import MARK_RANGES

    for version, table in MARK_RANGES.items():
        last = -1
        for part in table.split():
            assert re.fullmatch(r"[0-9A-F]+(-[0-9A-F]+)?", part), (version, part)
            lo, _, hi = part.partition("-")
            start, end = int(lo, 16), int(hi or lo, 16)
            assert last < start <= end, (version, part)
            last = end
