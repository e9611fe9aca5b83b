"""`mnemo-sea ui`: the read-only console (mnemo_sea/console) on 127.0.0.1, signed in by the link
it prints, as the principal the command was started as (`--tenant/--subject/--role/--clearance`,
like every command). `mnemo-sea serve` mounts the same pages under `/ui`, behind API keys."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from mnemo_sea.cli.output import guard
from mnemo_sea.cli.service import serve_settings
from mnemo_sea.cli.target import Target, add_command

if TYPE_CHECKING:
    from fastapi import FastAPI

# The file (or folder of files: the newest is shown) of `mnemo-sea eval context --json`.
ReportOpt = Annotated[
    Path | None,
    typer.Option(
        envvar="MNEMO_CONSOLE_REPORT",
        help="the curation report the console shows: a file of `eval context --json`, or a folder "
        "of them (the newest is shown)",
    ),
]


def ui(
    target: Target,
    host: Annotated[str, typer.Option(help="interface to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port")] = 8765,
    report: ReportOpt = None,
) -> None:
    """Serve the read-only console in a browser; open the link it prints (a sign-in token).

    It shows the sessions, evidence, memory, task states, audit trail and curation report of
    --tenant as --subject sees them; --role admin for the audit pages. It changes nothing.
    """
    from mnemo_sea.console.app import loopback, standalone_app
    from mnemo_sea.console.viewer import LaunchLogin
    from mnemo_sea.system.opening import open_mnemo

    with guard():
        principal = target.principal()
        settings = serve_settings(target.data_dir, target.embedder)
        if not settings.server_mode:
            target.folder()  # a missing folder is a clear line, not an empty new archive
        mnemo = open_mnemo(settings)
    launch = LaunchLogin(principal)
    if not loopback(host):
        typer.echo(
            f"warning: --host {host} is not a loopback address: the console and its sign-in link "
            "travel unencrypted to anyone who can reach it; put a TLS proxy in front",
            err=True,
        )
    app = standalone_app(mnemo, settings, host=host, launch=launch, report=report, close_on_shutdown=True)
    shown = f"[{host}]" if ":" in host else host
    link = (
        f"console of tenant {principal.tenant_id!r} as {principal.subject!r}: "
        f"http://{shown}:{port}/ui/login?token={launch.token}"
    )
    _serve_announcing(app, host, port, link)


def _serve_announcing(app: FastAPI, host: str, port: int, link: str) -> None:
    """Run uvicorn, printing `link` once it listens (so the link works when it is shown, and a
    script may read the line as the sign that the console is up). uvicorn is imported here: the
    CLI's frame must load without the 'server' extra."""
    import uvicorn

    class Announcing(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets=sockets)
            if self.started:
                typer.echo(link, err=True)

    config = uvicorn.Config(app, host=host, port=port, log_config=None, access_log=False, server_header=False)
    Announcing(config).run()


def register(app: typer.Typer) -> None:
    add_command(app, "ui", ui)
