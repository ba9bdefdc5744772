"""The public face of the Celery executor."""

from langgraph_celery.worker.client import RunHandle
from langgraph_celery.worker.executor import CeleryExecutor

__all__ = ["CeleryExecutor", "RunHandle"]
