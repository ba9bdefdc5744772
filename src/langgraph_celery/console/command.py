"""``langgraph-celery console MODULE [MODULE...] [--host H] [--port P] [--basic-auth USER:PASS |
--token T] [--flower-url URL]``: the command line of the console (``cli.py`` adds it).

The credentials can also come from the environment, so that they do not show in ``ps``:
``LGC_CONSOLE_BASIC_AUTH`` (``USER:PASS``) and ``LGC_CONSOLE_TOKEN``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from types import ModuleType
from typing import IO, Any

__all__ = ["BASIC_AUTH_ENV", "TOKEN_ENV", "add_arguments", "run"]

BASIC_AUTH_ENV = "LGC_CONSOLE_BASIC_AUTH"
TOKEN_ENV = "LGC_CONSOLE_TOKEN"
MISSING = (
    "the console needs its extra: pip install 'langgraph-celery[console]' (FastAPI, uvicorn, "
    "Jinja2); missing: {name}"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "modules",
        metavar="MODULE",
        nargs="+",
        help="module with compiled graphs (all are served), or MODULE:GRAPH for one",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="port (default: 8765)")
    auth = parser.add_mutually_exclusive_group()
    auth.add_argument(
        "--basic-auth", metavar="USER:PASS", help=f"HTTP basic auth (or ${BASIC_AUTH_ENV})"
    )
    auth.add_argument("--token", metavar="T", help=f"a bearer token (or ${TOKEN_ENV})")
    parser.add_argument(
        "--flower-url", metavar="URL", help="Flower's address: node tasks link to it"
    )


def run(
    args: argparse.Namespace,
    out: IO[str],
    importer: Callable[[str], ModuleType],
    usage_error: Callable[[str], Exception],
) -> int:
    """Serve the console for ``args.modules``; ``importer`` imports a module by name and
    ``usage_error`` makes the exception for a bad argument (both from ``cli.py``)."""
    try:
        import fastapi  # noqa: F401
        import jinja2  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as error:
        raise usage_error(MISSING.format(name=error.name)) from None
    from langgraph_celery.console.catalog import Catalog, CatalogError, graphs_of
    from langgraph_celery.console.server import serve
    from langgraph_celery.console.settings import ConsoleSettings, SettingsError

    basic_auth = args.basic_auth
    token = args.token
    if basic_auth is None and token is None:
        basic_auth = os.environ.get(BASIC_AUTH_ENV) or None
        token = None if basic_auth else os.environ.get(TOKEN_ENV) or None
    try:
        settings = ConsoleSettings(
            host=args.host,
            port=args.port,
            basic_auth=basic_auth,
            token=token,
            flower_url=args.flower_url,
        )
    except SettingsError as error:
        raise usage_error(str(error)) from None
    found: list[tuple[ModuleType, str, Any]] = []
    for target in args.modules:
        module_name, _, attribute = target.partition(":")
        module = importer(module_name)
        try:
            found += [(module, name, g) for name, g in graphs_of(module, attribute or None)]
        except CatalogError as error:
            raise usage_error(str(error)) from None
    serve(Catalog.of(found), settings, out)
    return 0
