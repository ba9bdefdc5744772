"""Port of LangGraph4j's ``exception/ExceptionTest`` (``langgraph4j-core``): an interruption and
a node failure are told apart by their class.  ``GraphInterruptException`` is SPEC's
``GraphInterrupt`` (control flow, not a ``GraphError``), ``GraphRunnerException`` its
``NodeError`` (a ``GraphError``)."""

from __future__ import annotations

import pytest

from langgraph_celery import GraphError, GraphInterrupt, NodeError


def raise_exception_1() -> None:
    raise GraphInterrupt("need to interrupt graph execution")


def raise_exception_2() -> None:
    raise NodeError("node", "RuntimeError", "error on execution")


def test_handle_interruption_exception_case1() -> None:
    """``ExceptionTest.handleInterruptionExceptionCase1``."""
    try:
        raise_exception_1()
    except GraphError:
        pytest.fail("Expected GraphInterrupt, but caught a GraphError")
    except GraphInterrupt as interrupt:
        assert str(interrupt) == "need to interrupt graph execution"
        assert interrupt.reason == "need to interrupt graph execution"
    else:
        pytest.fail("nothing was raised")


def test_handle_runner_exception_case2() -> None:
    """``ExceptionTest.handleRunnerExceptionCase2``: SPEC's ``NodeError`` message also names
    the node and says how to resume, so ``error_message`` is the text it was raised with."""
    try:
        raise_exception_2()
    except GraphInterrupt:
        pytest.fail("Expected NodeError, but caught GraphInterrupt")
    except GraphError as error:
        assert isinstance(error, NodeError)
        assert error.error_message == "error on execution"
        assert "error on execution" in str(error)
    else:
        pytest.fail("nothing was raised")
