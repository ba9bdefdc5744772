"""Port of LangGraph4j's ``RunnableConfigTest`` (``langgraph4j-core``).

``RunnableConfig`` is a frozen dataclass (SPEC §1): LangGraph4j's builder is its constructor,
``updateMetadata(map)`` is ``put_metadata`` per key, and the ``with*`` copies are
``dataclasses.replace``.
"""

from __future__ import annotations

import dataclasses

import pytest

from langgraph_celery import RunnableConfig, StreamMode


def test_runnable_config_update_metadata() -> None:
    """``RunnableConfigTest.runnableConfigUpdateMetadataTest``: ``add_metadata`` adds keys;
    replacing one (``put_metadata``) keeps the others, and returns a new config."""
    config = (
        RunnableConfig().add_metadata("nodeId", "test1").add_metadata("graphPath", "test1/test2")
    )
    assert config.metadata["nodeId"] == "test1"
    assert config.metadata["graphPath"] == "test1/test2"

    updated = config.put_metadata("nodeId", "test2")
    assert updated.metadata["nodeId"] == "test2"
    assert updated.metadata["graphPath"] == "test1/test2"
    assert config.metadata["nodeId"] == "test1"  # (frozen: the original is unchanged)

    with pytest.raises(ValueError, match="nodeId"):  # (SPEC §1: add_metadata refuses a key)
        config.add_metadata("nodeId", "test3")


def test_recursion_limit_is_preserved_by_config_copies() -> None:
    """``RunnableConfigTest.recursionLimitIsPreservedByConfigCopies``."""
    config = RunnableConfig(recursion_limit=10)
    assert config.recursion_limit == 10
    assert dataclasses.replace(config).recursion_limit == 10
    assert dataclasses.replace(config, stream_mode=StreamMode.SNAPSHOTS).recursion_limit == 10
    assert dataclasses.replace(config, checkpoint_id="checkpoint-1").recursion_limit == 10
    assert config.put_metadata("key", "value").recursion_limit == 10
    assert config.add_metadata("key", "value").recursion_limit == 10


@pytest.mark.parametrize("limit", [0, -1])
def test_recursion_limit_must_be_positive(limit: int) -> None:
    """``RunnableConfigTest.recursionLimitMustBePositive``."""
    with pytest.raises(ValueError):
        RunnableConfig(recursion_limit=limit)
