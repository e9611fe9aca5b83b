"""Token counts: a real BPE tokenizer from packaged files, the same as tiktoken's own, offline."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tiktoken
import tiktoken_ext.openai_public as published

from mnemo_sea.archive import InvalidInput
from mnemo_sea.context.tokens import (
    ENCODINGS,
    BpeCounter,
    CachedCounter,
    CharEstimate,
    mergeable_ranks,
    token_counter,
)

SAMPLES = [
    "hello world",
    "订单 O-1042 已发货，物流查询超时，当前派送状态未知。",
    "MDR1 基因检测：突变型 (mut/mut)；伊维菌素禁用。 Ivermectin contraindicated.",
    '<context_result id="r3" tool="logs.query">\n2026-11-30T10:00:01Z ERROR payment-gateway 500\n'
    "</context_result>\n",
    "special tokens are data: <|endoftext|> <|fim_prefix|>",
    "  leading and trailing whitespace \n\n\t",
    "",
]


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_the_packaged_definition_is_the_published_one(encoding: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Our pattern and special tokens equal what tiktoken's own constructor returns, and with the
    same ranks both encode every sample to the same ids (tiktoken's loader is replaced by the
    packaged ranks, which are checked against the sha256 it passes)."""
    ranks = mergeable_ranks(encoding)
    expected_hash: list[str | None] = []

    def load(url: str, expected_hash_: str | None = None) -> dict[bytes, int]:
        expected_hash.append(expected_hash_)
        return ranks

    monkeypatch.setattr(
        published, "load_tiktoken_bpe", lambda url, expected_hash=None: load(url, expected_hash)
    )
    spec = getattr(published, encoding)()
    reference = tiktoken.Encoding(
        name=spec["name"],
        pat_str=spec["pat_str"],
        mergeable_ranks=spec["mergeable_ranks"],
        special_tokens=spec["special_tokens"],
    )
    ours = BpeCounter(encoding)
    assert ours._encoding._pat_str == spec["pat_str"]
    assert ours._encoding._special_tokens == spec["special_tokens"]
    from mnemo_sea.context.tokens import _ENCODINGS

    assert expected_hash == [_ENCODINGS[encoding].sha256]
    for text in SAMPLES:
        assert ours.encode(text) == reference.encode_ordinary(text)
        assert ours.count(text) == len(reference.encode_ordinary(text))


def test_counts_are_tokens_not_characters() -> None:
    counter = BpeCounter()
    assert counter.count("hello world") == 2
    chinese = SAMPLES[1]
    # Chinese text costs far more than a quarter token per character: an estimate would be wrong.
    assert counter.count(chinese) > len(chinese) / 4
    assert counter.count("") == 0
    assert BpeCounter("o200k_base").count(chinese) < counter.count(chinese)  # o200k is denser for Chinese


def test_a_tampered_encoding_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gzip
    import importlib.metadata

    from mnemo_sea.archive import StoreUnavailable
    from mnemo_sea.context import tokens

    fake = tmp_path / "bpe_openai" / "data"
    fake.mkdir(parents=True)
    (fake / "cl100k_base.tiktoken.gz").write_bytes(gzip.compress(b"aGVsbG8= 0\n"))

    class Dist:
        def locate_file(self, relative: str) -> Path:
            return tmp_path / relative

    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: Dist())
    with pytest.raises(StoreUnavailable, match="not the published"):
        tokens.mergeable_ranks("cl100k_base")


def test_an_estimate_is_only_had_by_asking_and_says_so() -> None:
    estimate = token_counter("estimate:chars/4")
    assert isinstance(estimate, CharEstimate) and estimate.exact is False
    assert estimate.count("abcdefghi") == 3 and estimate.name == "estimate:chars/4"
    assert token_counter().exact is True and token_counter().name == "cl100k_base"
    with pytest.raises(InvalidInput, match="encoding"):
        token_counter("p50k_edit")
    with pytest.raises(InvalidInput, match="ratio"):
        token_counter("estimate:chars/x")


def test_the_cache_counts_each_distinct_text_once() -> None:
    calls: list[str] = []

    class Counting:
        name = "counting"
        exact = True

        def count(self, text: str) -> int:
            calls.append(text)
            return len(text)

    cached = CachedCounter(Counting(), max_entries=2)
    assert [cached.count(t) for t in ("a", "bb", "a", "bb")] == [1, 2, 1, 2]
    assert calls == ["a", "bb"] and cached.hits == 2
    cached.count("ccc")  # evicts the least recently used ("a")
    cached.count("a")
    assert calls == ["a", "bb", "ccc", "a"]


_OFFLINE_SCRIPT = textwrap.dedent(
    """
    import json, socket, sys

    def refuse(*args, **kwargs):
        raise SystemExit("the tokenizer tried to reach the network")

    # Belt and braces: with `unshare -n` there is no network at all; the guard also fails the
    # run loudly if anything even tries (name lookups included).
    socket.socket.connect = refuse
    socket.socket.connect_ex = refuse
    socket.getaddrinfo = refuse
    socket.create_connection = refuse

    from mnemo_sea.context.tokens import BpeCounter

    texts = json.loads(sys.argv[1])
    print(json.dumps({e: [BpeCounter(e).count(t) for t in texts] for e in ("cl100k_base", "o200k_base")}))
    """
)


def _no_network_prefix() -> list[str]:
    unshare = shutil.which("unshare")
    if unshare is not None and subprocess.run([unshare, "-n", "true"], check=False).returncode == 0:
        return [unshare, "-n"]
    if os.environ.get("CI") == "true" and os.geteuid() == 0:
        pytest.fail("unshare -n is not available, though this CI machine runs as root")
    return []  # the socket guard alone (not root here): still fails on any connection attempt


def test_the_counter_works_in_a_process_without_network(tmp_path: Path) -> None:
    env = {
        **os.environ,
        # An empty cache: tiktoken could otherwise find a file downloaded earlier.
        "TIKTOKEN_CACHE_DIR": str(tmp_path / "tiktoken-cache"),
        "DATA_GYM_CACHE_DIR": str(tmp_path / "data-gym-cache"),
        "HOME": str(tmp_path),
    }
    run = subprocess.run(
        [*_no_network_prefix(), sys.executable, "-c", _OFFLINE_SCRIPT, json.dumps(SAMPLES)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    counts = json.loads(run.stdout)
    for encoding in ("cl100k_base", "o200k_base"):
        assert counts[encoding] == [BpeCounter(encoding).count(t) for t in SAMPLES]
    assert not (tmp_path / "tiktoken-cache").exists()  # nothing was downloaded or cached
