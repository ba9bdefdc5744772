"""Port of LangGraph4j's ``StateGraphMemorySaverTest`` (``langgraph4j-core``): the earlier name
of ``LG4JMemorySaverTest``, with the same methods (``testCheckpointSaverResubmit`` reads the
thread's versions of a ``VersionedMemorySaver`` where ``LG4JMemorySaverTest`` reads
``saver.tag(...)``).  Its ports are those of ``test_lg4j_memory_saver.py``, collected here again
under this class's name; see that module for what differs and what is not ported
(``testMemoryWithVersionsSaver``, about thread versions).
"""

from __future__ import annotations

from test_lg4j_memory_saver import (
    test_checkpoint_initial_state,
    test_checkpoint_saver_resubmit,
    test_pause_and_update_past_graph_state,
    test_view_and_update_past_graph_state,
)

__all__ = [
    "test_checkpoint_initial_state",
    "test_checkpoint_saver_resubmit",
    "test_pause_and_update_past_graph_state",
    "test_view_and_update_past_graph_state",
]
