"""A module that repeats the URLs it is given, as a careless module or library would:
``test_cli_secrets.py`` runs ``cli_leaky:leaky`` through the CLI, from ``tests/``.

Its node logs ``LGC_DATABASE_URL`` (warning), warns with it and raises an error naming it and
``LGC_BROKER_URL``; with ``CLI_LEAKY_IMPORT_FAILS`` set, importing the module fails with an
error naming both.
"""

from __future__ import annotations

import logging
import os
import warnings
from typing import Any

from langgraph_celery import END, START, AgentState, StateGraph

DATABASE_URL = os.environ.get("LGC_DATABASE_URL", "")
BROKER_URL = os.environ.get("LGC_BROKER_URL", "")

if os.environ.get("CLI_LEAKY_IMPORT_FAILS"):
    raise RuntimeError(f"cannot open {DATABASE_URL} (broker {BROKER_URL})")

log = logging.getLogger("cli_leaky")


def leak(state: AgentState) -> dict[str, Any]:
    log.warning("connecting to %s", DATABASE_URL)
    warnings.warn(f"the database at {DATABASE_URL} is slow", stacklevel=1)
    raise ConnectionError(f"cannot connect to {DATABASE_URL} (broker {BROKER_URL!r})")


#: Its only node logs, warns and raises with the URLs (no checkpoints).
leaky = StateGraph().add_node("leak", leak).add_edge(START, "leak").add_edge("leak", END).compile()
