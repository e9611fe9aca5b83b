"""A typed Python client for the REST API of mnemo-sea (`mnemo-sea serve`), sync and async.

    from mnemo_sea.client import MnemoClient

    with MnemoClient("http://127.0.0.1:8000", api_key="msk_...") as mnemo:
        found = mnemo.search("amoxicillin dose for a 30 kg dog", limit=5)
        for hit in found.hits:
            print(hit.evidence_id, hit.locator, hit.snippet)

`MnemoClient` and `AsyncMnemoClient` mirror the facade `Mnemo` (names, keyword parameters,
result types), without the principal, which the API key decides:

    api       the two clients: sending, waiting, retrying
    calls     every operation once: its requests, and its answer as the library's types
    retry     when a request is sent again (`RetryPolicy`) and how long the client waits first
    errors    problem+json answers as the library's typed errors; `ApiUnreachable`, and
              `BadAnswer` (`MalformedAnswer`, `InconsistentAnswer`) for an answer refused
    answers   what an operation reads of an answer, and what the client checks of it itself
    envelopes a live view's envelopes checked against their results
    wire      requests, replies and their JSON

It imports the archive's records and errors, the result types of the facade and the
retrieval layer's errors, never the index engine, the model or the server: importing it
loads neither torch, Qdrant nor ONNX Runtime (tests/client/test_client_imports.py).
"""

from mnemo_sea.client.api import DEFAULT_URL, AsyncMnemoClient, MnemoClient
from mnemo_sea.client.calls import ComponentHealth, Health
from mnemo_sea.client.errors import ApiUnreachable, BadAnswer, InconsistentAnswer, MalformedAnswer
from mnemo_sea.client.retry import RetryPolicy

__all__ = [
    "DEFAULT_URL",
    "ApiUnreachable",
    "AsyncMnemoClient",
    "BadAnswer",
    "ComponentHealth",
    "Health",
    "InconsistentAnswer",
    "MalformedAnswer",
    "MnemoClient",
    "RetryPolicy",
]
