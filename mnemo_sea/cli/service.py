"""`mnemo-sea serve` (the REST API) and `mnemo-sea keys` (API keys for it and the MCP server).

Both read the service settings (MNEMO_*, see mnemo_sea.system.wiring.settings): MNEMO_DATABASE_URL for
server mode, else the embedded data folder (`--data-dir` / MNEMO_DATA_DIR).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from mnemo_sea.cli.output import JsonOpt, emit, guard, shown
from mnemo_sea.cli.target import embedder_choice
from mnemo_sea.system.wiring.settings import MnemoSettings

keys_app = typer.Typer(
    no_args_is_help=True,
    help="API keys: create, list, revoke (shown once at creation); rotate-receipt-key: the deployment key.",
)

DataDir = Annotated[
    Path | None,
    typer.Option("--data-dir", envvar="MNEMO_DATA_DIR", help="embedded mode: the data folder"),
]


def _settings(data_dir: Path | None) -> MnemoSettings:
    settings = MnemoSettings()
    return settings if data_dir is None else settings.model_copy(update={"data_dir": data_dir})


def serve_settings(data_dir: Path | None, embedder: str | None) -> MnemoSettings:
    """The settings `serve` and `mcp` run with: `--embedder` (or MNEMO_EMBEDDER) if given, else,
    on the embedded default, the embedder the data folder's index was built with, like every
    other command (a hashing-built folder would otherwise refuse the default model)."""
    settings = _settings(data_dir)
    folder = None if settings.server_mode else settings.data_dir
    return settings.model_copy(update={"embedder": embedder_choice(embedder, folder)})


def serve(
    host: Annotated[str, typer.Option(envvar="MNEMO_HOST", help="interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(envvar="MNEMO_PORT", min=1, max=65535, help="TCP port")] = 8000,
    data_dir: DataDir = None,
    embedder: Annotated[
        str | None,
        typer.Option(
            envvar="MNEMO_EMBEDDER",
            help="default (all-MiniLM-L6-v2) | hashing (tests/offline smoke only); "
            "default: what the data folder's index was built with",
        ),
    ] = None,
    console: Annotated[
        bool, typer.Option(envvar="MNEMO_CONSOLE", help="serve the read-only console under /ui")
    ] = True,
    report: Annotated[
        Path | None,
        typer.Option(
            envvar="MNEMO_CONSOLE_REPORT",
            help="the curation report the console shows (a file of `eval context --json`, or a "
            "folder of them: the newest)",
        ),
    ] = None,
) -> None:
    """Serve the REST API (OpenAPI at /openapi.json, docs at /docs) until SIGTERM or Ctrl-C,
    and the read-only console at /ui (sign in with an API key).

    Logs are JSON lines on stderr, one per request, with the request id and no secrets.
    """
    import uvicorn

    from mnemo_sea.console.app import mount
    from mnemo_sea.rest.app import create_app
    from mnemo_sea.rest.observability import configure_logging
    from mnemo_sea.system.opening import open_mnemo

    with guard():
        settings = serve_settings(data_dir, embedder)
        mnemo = open_mnemo(settings)
    configure_logging()
    app = create_app(mnemo, settings, close_on_shutdown=True)
    if console:
        mount(app, report=report)
    uvicorn.run(app, host=host, port=port, log_config=None, access_log=False, server_header=False)


@keys_app.command("create")
def keys_create(
    tenant: Annotated[str, typer.Option(help="the tenant the key acts in")],
    subject: Annotated[str, typer.Option(help="the user or agent it acts as")],
    role: Annotated[list[str], typer.Option(help="reader | agent | admin (repeatable)")],
    clearance: Annotated[
        str, typer.Option(help="public | internal | confidential | restricted")
    ] = "internal",
    name: Annotated[str, typer.Option(help="a label for listings")] = "",
    data_dir: DataDir = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a key and print it once (`api_key`); only its hash is stored."""
    from mnemo_sea.system.opening import open_archive

    with guard(as_json):
        archive = open_archive(_settings(data_dir))
        try:
            key, info = archive.create_key(
                tenant_id=tenant, subject=subject, roles=role, clearance=clearance, name=name
            )
        finally:
            archive.close()
    emit({"api_key": key, **info.to_dict()}, as_json)


@keys_app.command("list")
def keys_list(
    tenant: Annotated[str | None, typer.Option(help="only this tenant's keys")] = None,
    data_dir: DataDir = None,
    as_json: JsonOpt = False,
) -> None:
    """List keys (never their secrets), revoked ones included: one line each, a JSON array with --json."""
    from mnemo_sea.system.opening import open_archive

    with guard(as_json):
        archive = open_archive(_settings(data_dir))
        try:
            keys = archive.list_keys(tenant)
        finally:
            archive.close()
    if as_json:
        typer.echo(json.dumps([k.to_dict() for k in keys], ensure_ascii=False, indent=2))
        return
    for k in keys:
        d = k.to_dict()
        typer.echo(
            f"{d['key_id']}  tenant={d['tenant_id']} subject={d['subject']} roles={','.join(k.roles)} "
            f"clearance={d['clearance']} name={shown(d['name'] or None)} created={d['created_at']} "
            f"revoked={shown(d['revoked_at'])}"
        )


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="the key_id shown by create or list")],
    data_dir: DataDir = None,
    as_json: JsonOpt = False,
) -> None:
    """Revoke a key: requests with it get 401 from now on."""
    from mnemo_sea.system.opening import open_archive

    with guard(as_json):
        archive = open_archive(_settings(data_dir))
        try:
            info = archive.revoke_key(key_id)
        finally:
            archive.close()
    emit(info.to_dict(), as_json)


@keys_app.command("rotate-receipt-key")
def keys_rotate_receipt_key(data_dir: DataDir = None, as_json: JsonOpt = False) -> None:
    """Replace the deployment key that signs deletion receipts and audit anchors by a new one.

    The old key is kept (`receipt.key.retired`) for verifying what it signed; the rotation is
    an audit event. After a lost key it starts a new one. Restart running servers afterwards.
    """
    from mnemo_sea.system.opening import rotate_receipt_key

    with guard(as_json):
        rotation = rotate_receipt_key(_settings(data_dir))
    emit(rotation.to_dict(), as_json)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.add_typer(keys_app, name="keys")
