"""Port of LangGraph4j's ``GraphTest`` (``langgraph4j-core``): the earlier name of ``LG4JTest``,
with the same methods (its ``NodeActionBuilder`` reads the deprecated ``graphPath()`` and its
node error is ``GraphRunException``, as ``LG4JTest``'s ``nodePath()`` and
``GraphRunnerException``).  Its ports are those of ``test_lg4j.py``, collected here again under
this class's name; see that module for what differs and what is not ported.
"""

from __future__ import annotations

from test_lg4j import (
    test_command_node_issue163,
    test_get_result_from_generator,
    test_handle_graph_run_exception,
    test_handle_runtime_exception,
    test_runnable_config_metadata,
    test_running_one_node,
    test_running_one_node_one_remove_by_null,
    test_validation,
    test_with_appender,
    test_with_appender_one_append_one_remove,
    test_with_appender_one_remove,
    test_with_parallel_branch,
    test_with_parallel_branch_with_errors,
)

__all__ = [
    "test_command_node_issue163",
    "test_get_result_from_generator",
    "test_handle_graph_run_exception",
    "test_handle_runtime_exception",
    "test_runnable_config_metadata",
    "test_running_one_node",
    "test_running_one_node_one_remove_by_null",
    "test_validation",
    "test_with_appender",
    "test_with_appender_one_append_one_remove",
    "test_with_appender_one_remove",
    "test_with_parallel_branch",
    "test_with_parallel_branch_with_errors",
]
