"""Deterministic content generators for trace tool results: long, realistic, exact in size.

A trace names a generator instead of carrying megabytes of text (`{"generator": {"name":
"otel_log", "size": 1250000, "seed": 7, "params": {...}}}`). The same arguments give the same
text on every machine and Python version, because every choice comes from `random.Random(seed)`
and nothing reads the clock, the locale or hash order. `size` is exact, in characters (`len`).

Facts a trace's `need` events quote are planted as `needles`: exact strings, each on a line of
its own framed the way the generator frames its lines (a timestamped log line, a JSON row, ...),
at fractions `at` of the text (default: evenly spread). A needle is never cut by the size limit;
the last line of filler is, which is what a truncated tool output looks like.

Generators:
- `otel_log`: OpenTelemetry span and log records (logfmt, W3C trace/span ids) of a shop's services;
- `kubectl_log`: `kubectl logs` output of one pod, klog and JSON lines mixed, as Go services write;
- `lab_log`: a veterinary lab analyser's log in Chinese (血常规, 生化, 质控 lines);
- `order_log`: an order's warehouse, carrier and payment events;
- `json_rows`: JSON lines of rows (`schema`: `stock`, `orders` or `metrics`);
- `source_listing`: a Python module as a file-reading tool prints it, one numbered line each
  (`module`: its dotted name); a needle is a line of code, numbered where it lands;
- `test_log`: a pytest run (`-v`, captured logs, warnings) of a package (`package`);
- `report_text`: a long technical report in Markdown (sections, paragraphs, tables; `title`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from functools import lru_cache
from typing import Any

from mnemo_sea.archive import InvalidInput

from .trace import Generated

_UTC = UTC
_CST = timezone(timedelta(hours=8))


@dataclass(frozen=True)
class _Spec:
    """What a generator needs: a line maker, how a needle becomes a line, and its own params."""

    line: Callable[[random.Random, int, Mapping[str, Any]], str]
    frame: Callable[[random.Random, int, Mapping[str, Any], str], str]
    params: Mapping[str, type]  # parameter name -> type, besides `needles` and `at`
    defaults: Mapping[str, Any]


def _when(params: Mapping[str, Any], index: int, step_ms: int, default_zone: timezone) -> datetime:
    start: datetime | None = params.get("_start")
    if start is None:
        start = datetime(2026, 11, 30, 9, 0, tzinfo=default_zone)
    return start + timedelta(milliseconds=index * step_ms)


def _hex(rng: random.Random, digits: int) -> str:
    return f"{rng.getrandbits(digits * 4):0{digits}x}"


# ---- otel_log ----

_OTEL_SPANS = (
    ("checkout-svc", "POST /api/checkout", "SERVER"),
    ("checkout-svc", "CartService/GetCart", "CLIENT"),
    ("cart-svc", "CartService/GetCart", "SERVER"),
    ("checkout-svc", "PaymentService/Authorize", "CLIENT"),
    ("payment-svc", "PaymentService/Authorize", "SERVER"),
    ("payment-svc", "POST https://api.psp.example/v1/charges", "CLIENT"),
    ("checkout-svc", "ShippingService/Quote", "CLIENT"),
    ("shipping-svc", "ShippingService/Quote", "SERVER"),
    ("checkout-svc", "redis GET session", "CLIENT"),
    ("inventory-svc", "SELECT stock_levels", "CLIENT"),
)
_OTEL_LOGS = (
    ("INFO", "order placed"),
    ("INFO", "cart loaded items={n}"),
    ("DEBUG", "feature flag checkout.v2=on"),
    ("WARN", "slow upstream call duration_ms={ms}"),
    ("INFO", "payment authorized amount_cents={n}00"),
    ("WARN", "retrying request attempt=2"),
    ("INFO", "shipping quote carrier=BHX price_cents={n}9"),
)


def _otel_line(rng: random.Random, i: int, p: Mapping[str, Any]) -> str:
    ts = _when(p, i, 37, _UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    trace_id, span_id = _hex(rng, 32), _hex(rng, 16)
    if rng.random() < 0.7:
        service, name, kind = rng.choice(_OTEL_SPANS)
        ms = int(rng.lognormvariate(3.5, 0.8))
        code = 200 if rng.random() < 0.97 else rng.choice((429, 500, 503))
        status = "OK" if code == 200 else "ERROR"
        return (
            f"{ts} span service.name={service} name={name!r} kind={kind} trace_id={trace_id} "
            f"span_id={span_id} parent_span_id={_hex(rng, 16)} duration_ms={ms} status={status} "
            f"http.status_code={code} service.version={p['version']} k8s.pod.name={service}-{_hex(rng, 5)}"
        )
    level, text = rng.choice(_OTEL_LOGS)
    text = text.format(n=rng.randint(1, 9), ms=rng.randint(800, 2400))
    service = rng.choice(("checkout-svc", "payment-svc", "cart-svc"))
    ids = f"trace_id={trace_id} span_id={span_id}"
    return f"{ts} log severity={level} service.name={service} {ids} body={text!r}"


def _otel_frame(rng: random.Random, i: int, p: Mapping[str, Any], needle: str) -> str:
    ts = _when(p, i, 37, _UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return f"{ts} span service.name={p['service']} span_id={_hex(rng, 16)} {needle}"


# ---- kubectl_log ----

_KLOG = (
    ("I", "server.go:212", "handled request method=POST path=/api/checkout status=200 latency={ms}ms"),
    ("I", "server.go:212", "handled request method=GET path=/healthz status=200 latency=1ms"),
    ("I", "pool.go:88", "grpc client pool size=16 idle={n}"),
    ("W", "client.go:141", "upstream payment-svc slow: {ms}ms"),
    ("I", "cache.go:57", "session cache hit ratio=0.9{n}"),
    ("E", "client.go:163", "upstream cart-svc returned UNAVAILABLE, retrying"),
)


def _kubectl_line(rng: random.Random, i: int, p: Mapping[str, Any]) -> str:
    when = _when(p, i, 113, _UTC)
    if rng.random() < 0.55:
        sev, where, text = rng.choice(_KLOG)
        text = text.format(ms=rng.randint(3, 900), n=rng.randint(0, 9))
        return f"{sev}{when:%m%d %H:%M:%S}.{when.microsecond:06d}       1 {where}] {text}"
    record = {
        "level": rng.choice(("info", "info", "info", "debug", "warn")),
        "ts": round(when.timestamp(), 3),
        "caller": rng.choice(("checkout/handler.go:97", "payment/client.go:54", "http/server.go:3210")),
        "msg": rng.choice(("checkout started", "payment call finished", "cart fetched", "order persisted")),
        "pod": p["pod"],
        "request_id": _hex(rng, 12),
        "duration_ms": rng.randint(2, 700),
    }
    return f"{when.isoformat().replace('+00:00', 'Z')} " + json.dumps(record, separators=(",", ":"))


def _kubectl_frame(rng: random.Random, i: int, p: Mapping[str, Any], needle: str) -> str:
    when = _when(p, i, 113, _UTC)
    return f"E{when:%m%d %H:%M:%S}.{when.microsecond:06d}       1 client.go:163] {needle}"


# ---- lab_log ----

_CBC = (  # 血常规: code, name, unit, low, high
    ("WBC", "白细胞", "×10^9/L", 6.0, 17.0),
    ("RBC", "红细胞", "×10^12/L", 5.5, 8.5),
    ("HGB", "血红蛋白", "g/L", 120, 180),
    ("HCT", "红细胞压积", "%", 37, 55),
    ("PLT", "血小板", "×10^9/L", 200, 500),
    ("NEU#", "中性粒细胞", "×10^9/L", 3.0, 11.5),
    ("LYM#", "淋巴细胞", "×10^9/L", 1.0, 4.8),
)
_CHEM = (  # 生化
    ("ALT", "谷丙转氨酶", "U/L", 10, 100),
    ("AST", "谷草转氨酶", "U/L", 0, 50),
    ("ALP", "碱性磷酸酶", "U/L", 23, 212),
    ("CREA", "肌酐", "μmol/L", 44, 159),
    ("BUN", "尿素氮", "mmol/L", 2.5, 9.6),
    ("GLU", "葡萄糖", "mmol/L", 4.11, 7.95),
    ("TP", "总蛋白", "g/L", 52, 82),
    ("ALB", "白蛋白", "g/L", 23, 40),
)
_LAB_EVENTS = (
    "[质控] 仪器 {device} 质控品 L{n} 在控，批号 QC2611{n}",
    "[系统] 样本 {sample} 上机，吸样完成",
    "[系统] 样本 {sample} 报告已审核，审核人 技术员{n}号",
    "[提示] 样本 {sample} 轻度溶血，结果仅供参考",
)


def _lab_sample(p: Mapping[str, Any], i: int) -> str:
    # The analyser runs the whole clinic's samples: one sample id per ~40 result lines.
    return f"S-{_when(p, i, 0, _CST):%Y%m%d}-{i // 40:04d}"


def _lab_line(rng: random.Random, i: int, p: Mapping[str, Any]) -> str:
    when = _when(p, i, 1_900, _CST)
    stamp = f"{when:%Y-%m-%d %H:%M:%S}"
    roll = rng.random()
    if roll < 0.12:
        text = rng.choice(_LAB_EVENTS).format(
            device=rng.choice(("BC-5000Vet", "BS-240Vet")), n=rng.randint(1, 3), sample=_lab_sample(p, i)
        )
        return f"{stamp} {text}"
    panel, rows = ("血常规", _CBC) if roll < 0.55 else ("生化", _CHEM)
    code, name, unit, low, high = rng.choice(rows)
    value = round(rng.uniform(low * 0.8, high * 1.15), 2)
    flag = "↑ 偏高" if value > high else "↓ 偏低" if value < low else "正常"
    return (
        f"{stamp} [{panel}] 样本 {_lab_sample(p, i)} {code} {name} {value} {unit} (参考 {low}-{high}) {flag}"
    )


def _lab_frame(rng: random.Random, i: int, p: Mapping[str, Any], needle: str) -> str:
    when = _when(p, i, 1_900, _CST)
    return f"{when:%Y-%m-%d %H:%M:%S} [报告] 患者 {p['patient']} 样本 {_lab_sample(p, i)} {needle}"


# ---- order_log ----


def _order_line(rng: random.Random, i: int, p: Mapping[str, Any]) -> str:
    when = _when(p, i, 271_000, _CST).isoformat()
    o, t = p["order_id"], p["tracking_no"]
    roll = rng.random()
    if roll < 0.45:
        return f"{when} tracker  poll {t} carrier=BHX http=200 events_new=0 last=EXPORT_CUSTOMS_CLEARED"
    if roll < 0.65:
        return f"{when} carrier  {t} event=NONE hub=SIN-{rng.randint(1, 4)} scan=missing"
    if roll < 0.8:
        sku = rng.choice(("K-220", "K-221", "M-310", "T-118"))
        return f"{when} wms      order=O-{rng.randint(1000, 1999)} picked sku={sku} qty={rng.randint(1, 3)}"
    if roll < 0.92:
        return f"{when} payments order={o} ledger check ok captured=SGD89.00 refunds=0"
    return f"{when} notify   order={o} customer email queued template=delay_apology_{rng.randint(1, 3)}"


def _order_frame(rng: random.Random, i: int, p: Mapping[str, Any], needle: str) -> str:
    when = _when(p, i, 271_000, _CST).isoformat()
    return f"{when} carrier  {p['tracking_no']} {needle}"


# ---- json_rows ----

_STOCK_ITEMS = (
    ("AMX-250", "阿莫西林克拉维酸钾片 250mg"),
    ("MLX-15", "美洛昔康口服混悬液 15ml"),
    ("GAB-100", "加巴喷丁胶囊 100mg"),
    ("CFX-75", "头孢维星注射液 80mg/ml"),
    ("OMP-10", "奥美拉唑肠溶胶囊 10mg"),
    ("MTR-250", "甲硝唑片 250mg"),
    ("FUR-20", "呋塞米片 20mg"),
    ("MAR-20", "马罗匹坦片 16mg"),
)


def _rows_line(rng: random.Random, i: int, p: Mapping[str, Any]) -> str:
    schema = p["schema"]
    row: dict[str, Any]
    if schema == "stock":
        sku, name = rng.choice(_STOCK_ITEMS)
        row = {
            "sku": f"{sku}-{rng.randint(1, 99):02d}",
            "name": name,
            "lot": f"L{rng.randint(250101, 261130)}",
            "on_hand": rng.randint(0, 240),
            "location": f"药房-{rng.choice('ABCD')}{rng.randint(1, 12)}",
        }
    elif schema == "orders":
        row = {
            "order_id": f"O-{rng.randint(1000, 9999)}",
            "status": rng.choice(("shipped", "delivered", "in_transit", "cancelled")),
            "amount": f"SGD{rng.randint(5, 400)}.{rng.randint(0, 99):02d}",
            "carrier": rng.choice(("BHX", "SPX", "NJV")),
            "updated_at": _when(p, i, 90_000, _CST).isoformat(),
        }
    else:
        row = {
            "ts": _when(p, i, 15_000, _UTC).isoformat().replace("+00:00", "Z"),
            "metric": rng.choice(("http_server_duration_p99", "grpc_client_errors", "pod_cpu_millicores")),
            "service": rng.choice(("checkout-svc", "payment-svc", "cart-svc")),
            "value": round(rng.uniform(0, 2000), 3),
        }
    return json.dumps(row, ensure_ascii=False, separators=(", ", ": "))


def _rows_frame(rng: random.Random, i: int, p: Mapping[str, Any], needle: str) -> str:
    if needle.startswith("{"):
        return needle
    return json.dumps({"row": i, "remark": needle}, ensure_ascii=False, separators=(", ", ": "))


# ---- source_listing ----

_NAMES = ("invoice", "charge", "ledger", "policy", "attempt", "customer", "amount", "retry", "tax", "line")
_CODE = (
    "{ind}def {a}_{b}(self, {c}: {T}) -> {T}:",
    '{ind}"""Return the {a} {b} for one {c}."""',
    "{ind}{a} = self._{b}.get({c}.id)",
    "{ind}if {a} is None:",
    '{ind}    raise {T}Error(f"no {a} for {{{c}.id}}")',
    "{ind}for {a} in {b}s:",
    "{ind}total += {a}.{b} * {c}.rate",
    '{ind}log.debug("{a} %s {b} %s", {a}.id, {c})',
    "{ind}return {T}({a}={a}, {b}={b})",
    "{ind}self._{a}[{c}.id] = {b}",
    "",
    "{ind}# {a} is rounded per {b}, never per {c} (see ADR-{n})",
    "class {T}{U}:",
    "    {a}: {T} = field(default_factory={T})",
    "{ind}with self._lock:",
    "{ind}    self._{a}.append({b})",
)
_TYPES = ("Invoice", "Charge", "Ledger", "Policy", "Money", "Customer", "Attempt")


def _source_line(rng: random.Random, i: int, p: Mapping[str, Any]) -> str:
    a, b, c = rng.choice(_NAMES), rng.choice(_NAMES), rng.choice(_NAMES)
    code = rng.choice(_CODE).format(
        ind=" " * rng.choice((4, 8, 8, 12)),
        a=a,
        b=b,
        c=c,
        T=rng.choice(_TYPES),
        U=rng.choice(("Record", "State", "Plan", "")),
        n=rng.randint(1, 40),
    )
    return f"{i + 1:>6}\t{code}"


def _source_frame(rng: random.Random, i: int, p: Mapping[str, Any], needle: str) -> str:
    return f"{i + 1:>6}\t{needle}"


# ---- test_log ----


def _test_line(rng: random.Random, i: int, p: Mapping[str, Any]) -> str:
    module = rng.choice(("invoice", "ledger", "tax", "refunds", "policy", "api", "models"))
    roll = rng.random()
    if roll < 0.7:
        case = f"test_{rng.choice(_NAMES)}_{rng.choice(_NAMES)}"
        param = (
            f"[{rng.choice(('sgd', 'usd', 'cny', 'eur'))}-{rng.randint(0, 9)}]" if rng.random() < 0.4 else ""
        )
        pct = min(99, i // 40)
        return f"tests/test_{module}.py::{case}{param} PASSED{' ' * rng.randint(1, 30)}[{pct:>3}%]"
    if roll < 0.9:
        when = _when(p, i, 41, _UTC)
        level = rng.choice(("INFO", "DEBUG", "DEBUG", "WARNING"))
        return (
            f"{when:%H:%M:%S},{when.microsecond // 1000:03d} {level:<8} {p['package']}.{module}:{module}.py:"
            f"{rng.randint(20, 2400)} {rng.choice(_NAMES)} {rng.choice(('ok', 'skipped', 'cached'))}"
        )
    return (
        f"  {p['package']}/{module}.py:{rng.randint(20, 2400)}: DeprecationWarning: "
        f"{rng.choice(_NAMES)}_{rng.choice(_NAMES)}() is deprecated; use {rng.choice(_NAMES)}_v2()"
    )


def _test_frame(rng: random.Random, i: int, p: Mapping[str, Any], needle: str) -> str:
    return needle


# ---- report_text ----

_PROSE = (
    "The {a} of the {b} stage was measured over {n} runs, with the {c} held constant.",
    "Compared with the previous quarter, {a} {d} by {pct}% while {b} stayed within its budget.",
    "We attribute most of the change in {a} to the {b} rollout, not to {c} traffic.",
    "Section {sec} describes how the {a} baseline was chosen and why {b} was excluded.",
    "Operators reported {n} incidents involving {a}; none affected {b} correctness.",
    "The {c} sample is small, so the {a} figures below carry a wide interval (±{pct}%).",
)
_TOPICS = ("latency", "throughput", "error rate", "queue depth", "cache", "replication", "cost", "storage")


def _report_line(rng: random.Random, i: int, p: Mapping[str, Any]) -> str:
    roll = rng.random()
    if roll < 0.04:
        return f"\n## {rng.randint(2, 9)}.{rng.randint(1, 9)} {rng.choice(_TOPICS).title()} in {p['title']}\n"
    if roll < 0.14:
        region = rng.choice(("ap-southeast-1", "eu-west-1", "us-east-2", "cn-north-1"))
        return (
            f"| {region} | {rng.randint(80, 900)} ms | {rng.randint(900, 4000)} ms | {rng.randint(1, 99)} |"
        )
    sentences = [
        rng.choice(_PROSE).format(
            a=rng.choice(_TOPICS),
            b=rng.choice(_TOPICS),
            c=rng.choice(_TOPICS),
            d=rng.choice(("rose", "fell")),
            n=rng.randint(3, 400),
            pct=rng.randint(1, 60),
            sec=f"{rng.randint(2, 9)}.{rng.randint(1, 9)}",
        )
        for _ in range(rng.randint(2, 5))
    ]
    return " ".join(sentences)


def _report_frame(rng: random.Random, i: int, p: Mapping[str, Any], needle: str) -> str:
    return needle


# ---- the registry and the engine ----

GENERATORS: dict[str, _Spec] = {
    "otel_log": _Spec(
        _otel_line,
        _otel_frame,
        {"service": str, "version": str, "start": str},
        {"service": "checkout-svc", "version": "1.8.2", "start": ""},
    ),
    "kubectl_log": _Spec(
        _kubectl_line,
        _kubectl_frame,
        {"pod": str, "start": str},
        {"pod": "checkout-7d9f5c-xk2p", "start": ""},
    ),
    "lab_log": _Spec(_lab_line, _lab_frame, {"patient": str, "start": str}, {"patient": "P7", "start": ""}),
    "order_log": _Spec(
        _order_line,
        _order_frame,
        {"order_id": str, "tracking_no": str, "start": str},
        {"order_id": "O-1042", "tracking_no": "BHX7731042SG", "start": ""},
    ),
    "json_rows": _Spec(
        _rows_line, _rows_frame, {"schema": str, "start": str}, {"schema": "metrics", "start": ""}
    ),
    "source_listing": _Spec(_source_line, _source_frame, {"module": str}, {"module": "billing.invoice"}),
    "test_log": _Spec(
        _test_line, _test_frame, {"package": str, "start": str}, {"package": "billing", "start": ""}
    ),
    "report_text": _Spec(_report_line, _report_frame, {"title": str}, {"title": "the platform"}),
}
_SCHEMAS = ("stock", "orders", "metrics")


def check_generated(g: Generated) -> tuple[_Spec, dict[str, Any], list[str], list[float]]:
    """Validate a generator spec; returns (spec, params with defaults, needles, positions).

    Raises InvalidInput naming the field (`name`, `size`, `seed`, `params.<key>`)."""
    spec = GENERATORS.get(g.name)
    if spec is None:
        raise InvalidInput("name", f"{g.name!r} is not a generator; known: {', '.join(sorted(GENERATORS))}")
    if isinstance(g.size, bool) or not isinstance(g.size, int) or g.size <= 0:
        raise InvalidInput("size", f"must be a positive integer (characters), got {g.size!r}")
    if isinstance(g.seed, bool) or not isinstance(g.seed, int):
        raise InvalidInput("seed", f"must be an integer, got {g.seed!r}")
    params = dict(spec.defaults)
    for key, value in g.params.items():
        if key in ("needles", "at"):
            continue
        kind = spec.params.get(key)
        if kind is None:
            known = ", ".join(sorted([*spec.params, "needles", "at"]))
            raise InvalidInput(f"params.{key}", f"is not a parameter of {g.name}; known: {known}")
        if not isinstance(value, kind):
            raise InvalidInput(f"params.{key}", f"must be a {kind.__name__}, got {value!r}")
        params[key] = value
    if params.get("start"):
        try:
            start = datetime.fromisoformat(params["start"])
        except ValueError:
            start = None
        if start is None or start.tzinfo is None:
            raise InvalidInput(
                "params.start", f"must be an ISO-8601 time with a zone, got {params['start']!r}"
            )
        params["_start"] = start
    if g.name == "json_rows" and params["schema"] not in _SCHEMAS:
        raise InvalidInput("params.schema", f"must be one of {', '.join(_SCHEMAS)}, got {params['schema']!r}")
    needles = g.params.get("needles", [])
    if not isinstance(needles, list) or not all(isinstance(n, str) and n for n in needles):
        raise InvalidInput("params.needles", "must be a list of non-empty strings")
    for n in needles:
        if "\n" in n or "\r" in n:
            raise InvalidInput("params.needles", f"a needle is one line; {n[:60]!r} holds a line break")
    at = g.params.get("at")
    if at is None:
        positions = [(k + 1) / (len(needles) + 1) for k in range(len(needles))]
    else:
        ok = isinstance(at, list) and len(at) == len(needles)
        ok = ok and all(isinstance(x, int | float) and not isinstance(x, bool) and 0 <= x < 1 for x in at)
        if not ok:
            raise InvalidInput("params.at", "must be a list of fractions in [0, 1), one per needle")
        positions = [float(x) for x in at]
        if positions != sorted(positions):
            raise InvalidInput("params.at", "fractions must be in ascending order (needles in text order)")
    return spec, params, needles, positions


def generate(g: Generated) -> str:
    """The text of `g`: exactly `g.size` characters, every needle whole, same text for same args.

    Raises InvalidInput (see `check_generated`), or for a size too small to hold the needles."""
    spec, params, needles, positions = check_generated(g)
    rng = random.Random(g.seed)
    # Needle lines are framed with an rng of their own so planting a needle never shifts the filler.
    frame_rng = random.Random(g.seed ^ 0x5EED)
    size = g.size
    pending = list(zip(positions, needles, strict=True))
    # Room kept free for the needles still to come; frames differ only in fixed-width stamps,
    # so the estimate plus a margin always holds them.
    estimate = {n: len(spec.frame(random.Random(0), 0, params, n)) + 24 for n in needles}
    reserve = sum(estimate[n] for n in needles)
    if reserve + 64 > size:
        raise InvalidInput("size", f"{size} characters cannot hold the needles (about {reserve} framed)")
    parts: list[str] = []
    length = index = 0
    force = False
    while True:
        remaining = size - length
        if pending and (force or length >= pending[0][0] * size or remaining <= reserve + 64):
            needle = pending.pop(0)[1]
            line = spec.frame(frame_rng, index, params, needle) + "\n"
            if len(line) > remaining:  # a bug in an estimate, not a caller error
                raise AssertionError(f"needle line of {len(line)} characters does not fit in {remaining}")
            reserve -= estimate[needle]
            force = False
        elif remaining == 0:
            break
        else:
            line = spec.line(rng, index, params) + "\n"
            if len(line) > remaining - (reserve + 64 if pending else 0):
                if pending:
                    force = True
                    continue
                line = line[:remaining]  # the cut last line of a truncated tool output
        parts.append(line)
        length += len(line)
        index += 1
    text = "".join(parts)
    if len(text) != size:  # a bug, not a caller error: the contract is exact size
        raise AssertionError(f"generated {len(text)} characters, not {size}")
    return text


@lru_cache(maxsize=32)
def _generate_cached(name: str, size: int, seed: int, params_json: str) -> str:
    return generate(Generated(name, size, seed, json.loads(params_json)))


def original(content: str | Generated) -> str:
    """The original text of a tool call's content (generated text is cached: traces reuse it)."""
    if isinstance(content, str):
        return content
    params = json.dumps(content.params, sort_keys=True, ensure_ascii=False)
    return _generate_cached(content.name, content.size, content.seed, params)
