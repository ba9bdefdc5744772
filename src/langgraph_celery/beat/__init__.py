"""Maintenance run by ``celery beat``: the reaper, interrupt deadlines and scheduled runs."""
