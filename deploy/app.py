"""The demo agent as deployed by ``docker-compose.yml``: Celery on Redis, checkpoints in PostgreSQL.

Every service imports it as ``app`` (``celery -A app worker``, ``beat``, ``flower``), and so does
any client (``langgraph-celery run app:graph --input '{"topic": "Q3"}'``).  Write your own module
the same way: one Celery app, one shared checkpoint store, graphs compiled with both.

Environment (``docker-compose.yml`` builds it from ``.env``, see ``deploy/.env.example``):

``LGC_BROKER_URL``       ``redis://:<password>@redis:6379/0``
``LGC_RESULT_BACKEND``   optional; default: the broker
``LGC_DATABASE_URL``     ``postgresql://<user>:<password>@postgres:5432/<db>``
"""

from __future__ import annotations

import os

from langgraph_celery.demo import compile_graph, make_app


def _setting(name: str, schemes: tuple[str, ...]) -> str:
    value = os.environ.get(name, "")
    if not value.startswith(schemes):
        raise RuntimeError(
            f"set {name} to a {' or '.join(schemes)} URL (docker-compose.yml builds it from "
            f"deploy/.env.example; run by hand, export it: docs/deployment.md); got "
            f"{value.split('://')[0] + '://...' if value else 'nothing'}"
        )
    return value


app = make_app(
    _setting("LGC_BROKER_URL", ("redis://", "rediss://")),
    os.environ.get("LGC_RESULT_BACKEND") or None,
    name="app",
)
graph = compile_graph(app, _setting("LGC_DATABASE_URL", ("postgresql://", "postgresql+psycopg://")))
