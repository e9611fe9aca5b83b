"""`mnemo-sea mcp`: serve the agent's tools over MCP. `register(app)` adds the command.

stdio (the default) serves one client as one principal: `--api-key` (env MNEMO_API_KEY) when
given, else `--tenant/--subject/--role/--clearance` (env MNEMO_TENANT/MNEMO_SUBJECT/MNEMO_ROLE/
MNEMO_CLEARANCE). `--transport http` serves streamable HTTP at http://HOST:PORT/mcp, where every
request must carry `Authorization: Bearer <api key>` and runs as that key's principal (the
principal options are then unused). The system is opened from the settings (MNEMO_DATA_DIR for
the embedded default, or MNEMO_DATABASE_URL + MNEMO_QDRANT_URL; see mnemo_sea.system.wiring.settings),
as `serve` opens it: without `--embedder` an existing data folder keeps the embedder its index
was built with.

stdout belongs to the protocol on stdio, so every problem is one line `error: ...` on stderr,
with the exit codes of the other commands (mnemo_sea.cli.output, by the one error table in
mnemo_sea.system.outcomes; a bad API key is an input mistake there, as any bad option value).
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from pydantic import ValidationError

from mnemo_sea.archive import InvalidInput, Principal, Role, Sensitivity
from mnemo_sea.cli.output import CliError, guard
from mnemo_sea.cli.service import serve_settings

_PRINCIPAL = "Principal (stdio)"


class Transport(StrEnum):
    STDIO = "stdio"
    HTTP = "http"


def configured_principal(tenant: str, subject: str, role: str, clearance: str) -> Principal:
    """The stdio principal from the options. Raises InvalidInput naming the bad one."""
    try:
        parsed = Role(role.strip().lower())
    except ValueError:
        raise InvalidInput("role", f"{role!r} is not one of reader, agent, admin") from None
    return Principal(tenant, subject, frozenset({parsed}), Sensitivity.parse(clearance))


def mcp(
    transport: Annotated[Transport, typer.Option(help="stdio (one client, one principal) or http")] = (
        Transport.STDIO
    ),
    host: Annotated[str, typer.Option(help="http: the address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="http: the port to listen on")] = 8765,
    api_key: Annotated[
        str | None,
        typer.Option(
            envvar="MNEMO_API_KEY", help="stdio: act as this key's principal", rich_help_panel=_PRINCIPAL
        ),
    ] = None,
    tenant: Annotated[
        str, typer.Option(envvar="MNEMO_TENANT", help="stdio: act in this tenant", rich_help_panel=_PRINCIPAL)
    ] = "default",
    subject: Annotated[
        str, typer.Option(envvar="MNEMO_SUBJECT", help="stdio: act as this agent", rich_help_panel=_PRINCIPAL)
    ] = "mcp",
    role: Annotated[
        str,
        typer.Option(envvar="MNEMO_ROLE", help="stdio: reader | agent | admin", rich_help_panel=_PRINCIPAL),
    ] = "agent",
    clearance: Annotated[
        str,
        typer.Option(
            envvar="MNEMO_CLEARANCE",
            help="stdio: public | internal | confidential | restricted",
            rich_help_panel=_PRINCIPAL,
        ),
    ] = "internal",
    data_dir: Annotated[
        Path | None, typer.Option(envvar="MNEMO_DATA_DIR", help="the embedded data folder")
    ] = None,
    embedder: Annotated[
        str | None,
        typer.Option(envvar="MNEMO_EMBEDDER", help="default | hashing (tests and offline smoke runs only)"),
    ] = None,
) -> None:
    """Serve the agent's tools (search, record, archive, recover, remember, check citations) over MCP."""
    with guard():  # never as JSON: on stdio, stdout is the protocol's
        try:
            run(transport, host, port, api_key, tenant, subject, role, clearance, data_dir, embedder)
        except ValidationError as e:  # MNEMO_* settings: input, like the options
            raise CliError(str(e)) from None
        except KeyboardInterrupt:
            raise typer.Exit(code=0) from None


def run(
    transport: Transport,
    host: str,
    port: int,
    api_key: str | None,
    tenant: str,
    subject: str,
    role: str,
    clearance: str,
    data_dir: Path | None,
    embedder: str | None,
) -> None:
    """Open the system from the settings and serve until the client leaves or the process is stopped."""
    import anyio

    from mnemo_sea.mcp import build_server, fixed_principal, serve_http, serve_stdio
    from mnemo_sea.rest.admission import admission_of
    from mnemo_sea.system.opening import open_mnemo

    # Check the principal options before the (slow) open, so a typo fails at once.
    principal = None
    if transport is Transport.STDIO and api_key is None:
        principal = configured_principal(tenant, subject, role, clearance)
    settings = serve_settings(data_dir, embedder)
    mnemo = open_mnemo(settings)
    try:
        if transport is Transport.HTTP:
            shares = admission_of(settings)
            serve_http(
                mnemo, host=host, port=port, max_request_bytes=settings.max_request_bytes, admission=shares
            )
            return
        if principal is None:
            assert api_key is not None
            principal = mnemo.archive.authenticate(api_key)
        anyio.run(serve_stdio, build_server(mnemo, fixed_principal(principal)))
    finally:
        mnemo.close()


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp)


def main() -> None:
    """`python -m mnemo_sea.cli.mcp [OPTIONS]`: the command on its own."""
    app = typer.Typer(add_completion=False)
    register(app)
    app()


if __name__ == "__main__":
    main()
