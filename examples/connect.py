"""How the examples reach mnemo-sea: in process on a data folder, or a running server.

`connect(args)` returns an object with the facade's operations under the facade's names:
remote, `mnemo_sea.client.MnemoClient` (the API key says who calls); in process, the `Mnemo`
acting as the examples' agent (`mnemo.as_(AGENT)`), so the examples' code is the same for both.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mnemo_sea.archive import Principal, Role, Sensitivity

# In process, the examples act as this agent (a server decides from the API key instead).
TENANT = "vet-clinic"
AGENT = Principal(TENANT, "assistant", frozenset({Role.AGENT}), Sensitivity.CONFIDENTIAL)


def arguments(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--url", help="a running `mnemo-sea serve` (key from MNEMO_API_KEY); default: in process"
    )
    parser.add_argument("--data", type=Path, help="in process: the data folder (default: a temporary one)")
    parser.add_argument(
        "--embedder",
        choices=("default", "hashing"),
        default="default",
        help="in process: the real model (default) or the deterministic hashing embedder",
    )
    return parser.parse_args()


@contextmanager
def connect(args: argparse.Namespace) -> Iterator[Any]:
    """The client for `--url`, else a bound in-process `Mnemo` (closed on exit)."""
    if args.url:
        from mnemo_sea.client import MnemoClient

        with MnemoClient(args.url) as client:
            yield client
        return
    from mnemo_sea.system.mnemo import Mnemo

    embedder = None
    if args.embedder == "hashing":
        from mnemo_sea.system.wiring.hashing_embedder import HashingEmbedder

        embedder = HashingEmbedder()
    with tempfile.TemporaryDirectory(prefix="mnemo-example-") as scratch:
        folder = args.data or Path(scratch) / "data"
        with Mnemo.open(folder, embedder=embedder) as mnemo:
            yield mnemo.as_(AGENT)
