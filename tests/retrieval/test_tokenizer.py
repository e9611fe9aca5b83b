from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mnemo_sea.retrieval import ChineseSegmentation, Tokenizer, TokenizerSettings


def test_english_is_lowercased_stopped_and_stemmed() -> None:
    terms = Tokenizer().tokenize("The Studies of Running dogs")
    assert terms == ["studi", "run", "dog"]


def test_identifiers_are_kept_whole_and_by_part() -> None:
    terms = Tokenizer().tokenize("Order O-1042 shipped; see covid-19 and v2.3.1")
    for term in ("o-1042", "o", "1042", "covid-19", "covid", "19", "v2.3.1"):
        assert term in terms


def test_full_width_identifier_matches_ascii_one() -> None:
    tok = Tokenizer()
    assert "o-1042" in tok.tokenize("Ｏ－１０４２")  # NFKC folds full-width forms


def test_chinese_is_segmented_into_words_and_characters() -> None:
    terms = Tokenizer().tokenize("宝宝十个月没长牙怎么办")
    assert "宝宝" in terms and "长牙" in terms  # rjieba words
    assert "牙" in terms and "宝" in terms  # and single characters (see stopwords.py / eval README)


def test_chinese_particles_are_stop_words() -> None:
    assert "的" not in Tokenizer().tokenize("我的订单")


def test_mixed_text_yields_both_scripts() -> None:
    terms = Tokenizer().tokenize("订单O-1042延迟delayed")
    assert {"订单", "o-1042", "延迟", "delay"} <= set(terms)


def test_words_mode_uses_only_dictionary_words() -> None:
    tok = Tokenizer(TokenizerSettings(chinese=ChineseSegmentation.WORDS))
    assert tok.tokenize("长牙怎么办") == ["长牙", "怎么办"]


def test_emoji_punctuation_and_control_characters_are_separators() -> None:
    assert Tokenizer().tokenize("🙂\x00\x07!!!  \t ...") == []
    assert Tokenizer().tokenize("refund🙂policy\x00now") == ["refund", "polici", "now"]


def test_only_stop_words_yield_nothing() -> None:
    assert Tokenizer().tokenize("the of and to is it") == []


def test_absurdly_long_words_are_dropped_not_indexed() -> None:
    assert Tokenizer().tokenize("a" * 500 + " refund") == ["refund"]


def test_fingerprint_changes_with_settings() -> None:
    a = TokenizerSettings().fingerprint()
    b = TokenizerSettings(stem_english=False).fingerprint()
    assert a != b


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_text_yields_clean_terms_deterministically(text: str) -> None:
    tok = Tokenizer()
    terms = tok.tokenize(text)
    assert terms == tok.tokenize(text)
    for term in terms:
        assert term and term == term.strip() and not any(c.isspace() for c in term)
