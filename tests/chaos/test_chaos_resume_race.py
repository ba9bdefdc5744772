"""Two processes resume the same parked thread at the same instant: exactly one wins.

The loser gets a ``GraphStateError`` (it lost the ``__claim__`` on the parked checkpoint, or it
read the thread after the winner's resume had started); the resume update lands once, and the
run completes once.
"""

from __future__ import annotations

import multiprocessing
import queue
import uuid
from collections import Counter
from typing import Any

import pytest
from chaos_support import ChaosStack, assert_exact, race_client

from langgraph_celery import RunnableConfig

pytestmark = pytest.mark.timeout(150)

TRIALS = 50


def _get(outbox: Any, timeout: float = 60) -> tuple[str, str | None, str, Any]:
    try:
        item: tuple[str, str | None, str, Any] = outbox.get(timeout=timeout)
    except queue.Empty:
        raise AssertionError(f"no answer from a racing client in {timeout} s") from None
    return item


def test_concurrent_resumes_of_one_parked_thread(chaos_stack: ChaosStack) -> None:
    stack = chaos_stack
    gate = stack.graph("gate")
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(2)
    outbox = context.Queue()
    inboxes = {name: context.Queue() for name in ("p1", "p2")}
    clients = [
        context.Process(
            target=race_client,
            args=(stack.settings, name, inbox, outbox, barrier),
            name=f"race-{name}",
            daemon=True,
        )
        for name, inbox in inboxes.items()
    ]
    for client in clients:
        client.start()
    try:
        assert {_get(outbox)[2] for _ in clients} == {"ready"}
        wins: Counter[str] = Counter()
        losses: Counter[str] = Counter()
        for trial in range(TRIALS):
            thread = f"race-{trial}-{uuid.uuid4().hex[:8]}"
            parked = gate.invoke({"sleep": {}}, RunnableConfig(thread_id=thread))
            assert parked.value("log") == ["a"]
            for inbox in inboxes.values():
                inbox.put(thread)
            answers = [_get(outbox) for _ in clients]
            assert {a[1] for a in answers} == {thread}, answers
            won = [a for a in answers if a[2] == "won"]
            lost = [a for a in answers if a[2] == "GraphStateError"]
            assert len(won) == 1 and len(lost) == 1, f"trial {trial}: {answers}"
            winner = won[0][0]
            expected = ["a", f"resumed-by-{winner}", "b", "c"]
            assert won[0][3] == expected
            assert_exact(stack.saver, thread, expected)
            wins[winner] += 1
            message = str(lost[0][3])
            losses["claim" if "just started or resumed" in message else "busy/done"] += 1
        # the race is real: both processes won some, and some losers lost the claim itself
        assert len(wins) == 2, wins
        print(f"resume race: wins {dict(wins)}, losses {dict(losses)}")
    finally:
        for inbox in inboxes.values():
            inbox.put(None)
        for client in clients:
            client.join(10)
            if client.is_alive():
                client.kill()
