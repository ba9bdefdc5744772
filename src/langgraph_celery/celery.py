"""The public face of the Celery executor."""

from langgraph_celery.worker.executor import CeleryExecutor
from langgraph_celery.worker.handle import RunHandle

__all__ = ["CeleryExecutor", "RunHandle"]
