"""The Celery executor: node and resume tasks, dispatch, and the client side of runs."""
