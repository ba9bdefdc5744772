"""The web console: see and steer the runs of langgraph-celery graphs (SPEC §11).

``langgraph-celery console MODULE`` serves it (install the ``console`` extra); docs/console.md
tells how to use it, its JSON API and its security.  From Python::

    from langgraph_celery.console import Catalog, ConsoleSettings, create_app

    app = create_app(Catalog.from_graphs({"letters": graph}), ConsoleSettings())
    # serve `app` with any ASGI server, e.g. uvicorn.run(app)

One concern per module: ``catalog`` (the graphs served), ``runs`` (reading runs and threads),
``steering`` (the buttons' actions), ``forms`` (approval forms from pydantic models),
``diagram`` (graphs drawn as SVG), ``diff`` (what changed), ``security`` (host, auth, CSRF),
``redact`` (credentials out of texts), ``models`` (the API's pydantic models), ``api``,
``events`` and ``pages`` (routes), ``app`` (the ASGI app), ``server`` and ``command`` (serving
it).  Importing this package needs no web library; :func:`create_app` needs the extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langgraph_celery.console.catalog import Catalog, CatalogError, GraphEntry
from langgraph_celery.console.forms import schema_ref
from langgraph_celery.console.settings import ConsoleSettings, SettingsError

if TYPE_CHECKING:
    from langgraph_celery.console.app import create_app

__all__ = [
    "Catalog",
    "CatalogError",
    "ConsoleSettings",
    "GraphEntry",
    "SettingsError",
    "create_app",
    "schema_ref",
]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from langgraph_celery.console.app import create_app

        return create_app
    raise AttributeError(f"module 'langgraph_celery.console' has no attribute {name!r}")
