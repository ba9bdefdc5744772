"""Port of LangGraph4j's ``StateGraphFileSystemSaverTest`` (``langgraph4j-core``): the earlier
name of ``LG4JFileSystemSaverTest``, the same three methods with an empty map as each run's
input (``app.invoke(Map.of(), config)``) where that one gives ``GraphInput.noArgs()``.  See
``test_port_LG4JFileSystemSaverTest.py`` for what differs (``SqlSaver`` on SQLite for
``FileSystemSaver``, ``release_thread=True`` for LangGraph4j's default).
"""

from __future__ import annotations

from pathlib import Path

from test_port_LG4JFileSystemSaverTest import (
    check_auto_release,
    check_manual_release,
    check_resubmit,
)


def test_checkpoint_saver_resubmit(tmp_path: Path) -> None:
    """``StateGraphFileSystemSaverTest.testCheckpointSaverResubmit``."""
    check_resubmit(tmp_path, {})


def test_checkpoint_saver_with_manual_release(tmp_path: Path) -> None:
    """``StateGraphFileSystemSaverTest.testCheckpointSaverWithManualRelease``."""
    check_manual_release(tmp_path, {})


def test_checkpoint_saver_with_auto_release(tmp_path: Path) -> None:
    """``StateGraphFileSystemSaverTest.testCheckpointSaverWithAutoRelease``."""
    check_auto_release(tmp_path, {})
