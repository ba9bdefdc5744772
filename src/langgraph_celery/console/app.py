"""The console as an ASGI application: :func:`create_app`.

Built on FastAPI (Starlette underneath, served by uvicorn): its routes take and return the
pydantic models of :mod:`.models`, which also give the OpenAPI document at
``/api/openapi.json``.  FastAPI's interactive docs pages are turned off: they load their
JavaScript from a CDN, and the console works with no internet.  Every request goes through
:class:`~.security.Guard` (host, authentication, CSRF, security headers).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.staticfiles import StaticFiles

from langgraph_celery.console import api, events, pages
from langgraph_celery.console.catalog import Catalog, CatalogError
from langgraph_celery.console.context import Console, UpdateError
from langgraph_celery.console.redact import redact
from langgraph_celery.console.security import Guard
from langgraph_celery.console.settings import ConsoleSettings
from langgraph_celery.console.steering import Steering, SteeringError

__all__ = ["create_app"]

STATIC = Path(__file__).parent / "static"


def _wants_html(request: Request) -> bool:
    return not request.url.path.startswith("/api/") and "text/html" in request.headers.get(
        "accept", ""
    )


def _error(request: Request, status: int, message: str) -> Response:
    message = redact(message)
    if _wants_html(request):
        return pages.templates.TemplateResponse(
            request,
            "error.html",
            {
                "csrf_token": getattr(request.state, "csrf_token", ""),
                "graphs": list(request.app.state.console.catalog),
                "flower_url": None,
                "notice": None,
                "nav": "",
                "error": message,
                "status": status,
            },
            status_code=status,
        )
    return JSONResponse({"detail": message}, status_code=status)


def create_app(
    catalog: Catalog, settings: ConsoleSettings | None = None, *, secret: bytes | None = None
) -> FastAPI:
    """The console for the graphs of ``catalog``; ``secret`` signs CSRF tokens (a random one
    by default, so tokens do not outlive the process)."""
    settings = settings or ConsoleSettings()
    console = Console(catalog, settings, Steering(catalog))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        console.steering.close()

    app = FastAPI(
        lifespan=lifespan,
        title="langgraph-celery console",
        summary="See and steer the runs of langgraph-celery graphs",
        docs_url=None,
        redoc_url=None,
        openapi_url="/api/openapi.json",
    )
    app.state.console = console
    app.include_router(api.router)
    app.include_router(events.router)
    app.include_router(pages.router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.exception_handler(CatalogError)
    async def not_found(request: Request, error: CatalogError) -> Response:
        return _error(request, 404, str(error))

    @app.exception_handler(SteeringError)
    async def refused(request: Request, error: SteeringError) -> Response:
        return _error(request, 409, str(error))

    @app.exception_handler(UpdateError)
    async def bad_update(request: Request, error: UpdateError) -> Response:
        return _error(request, 400, str(error))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> Response:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors()
        )
        return _error(request, 422, f"invalid request: {problems}")

    app.add_middleware(Guard, settings=settings, secret=secret or secrets.token_bytes(32))
    return app
