"""Two processes resume the same parked thread, or start the first run of the same new thread,
at the same instant: exactly one wins.

A resume's loser gets a ``GraphStateError`` (it lost the ``__claim__`` on the parked checkpoint,
or it read the thread after the winner's resume had started); the resume update lands once, and
the run completes once.  Of two first runs, one stores the thread's first checkpoint (a thread
has one checkpoint without a parent); the other gets a ``GraphStateError`` and the thread holds
one run.
"""

from __future__ import annotations

import multiprocessing
import queue
import uuid
from collections import Counter
from typing import Any

import pytest
from chaos_support import ChaosStack, assert_exact, describe, race_client

from langgraph_celery import RunnableConfig

pytestmark = pytest.mark.timeout(150)

TRIALS = 50
FIRST_RUN_TRIALS = 30


def _get(outbox: Any, timeout: float = 60) -> tuple[str, str | None, str, Any]:
    try:
        item: tuple[str, str | None, str, Any] = outbox.get(timeout=timeout)
    except queue.Empty:
        raise AssertionError(f"no answer from a racing client in {timeout} s") from None
    return item


class _Racers:
    """Two client processes that act on the thread they are given at the same instant."""

    def __init__(self, stack: ChaosStack) -> None:
        context = multiprocessing.get_context("spawn")
        self.barrier = context.Barrier(2)  # (kept: the children open it by name)
        self.outbox: Any = context.Queue()
        self.inboxes = {name: context.Queue() for name in ("p1", "p2")}
        self.clients = [
            context.Process(
                target=race_client,
                args=(stack.settings, name, inbox, self.outbox, self.barrier),
                name=f"race-{name}",
                daemon=True,
            )
            for name, inbox in self.inboxes.items()
        ]

    def __enter__(self) -> _Racers:
        for client in self.clients:
            client.start()
        assert {_get(self.outbox)[2] for _ in self.clients} == {"ready"}
        return self

    def race(self, action: str, thread: str) -> list[tuple[str, str | None, str, Any]]:
        for inbox in self.inboxes.values():
            inbox.put((action, thread))
        answers = [_get(self.outbox) for _ in self.clients]
        assert {a[1] for a in answers} == {thread}, answers
        return answers

    def __exit__(self, *exc: object) -> None:
        for inbox in self.inboxes.values():
            inbox.put(None)
        for client in self.clients:
            client.join(10)
            if client.is_alive():
                client.kill()


def test_concurrent_first_runs_of_one_new_thread(chaos_stack: ChaosStack) -> None:
    stack = chaos_stack
    wins: Counter[str] = Counter()
    with _Racers(stack) as racers:
        for trial in range(FIRST_RUN_TRIALS):
            thread = f"first-{trial}-{uuid.uuid4().hex[:8]}"
            answers = racers.race("start", thread)
            won = [a for a in answers if a[2] == "won"]
            lost = [a for a in answers if a[2] == "GraphStateError"]
            assert len(won) == 1 and len(lost) == 1, f"trial {trial}: {answers}\n" + describe(
                stack, thread
            )
            winner = won[0][0]
            assert won[0][3] == [f"started-by-{winner}", "a"]  # parked at the gate
            runs = {checkpoint.run_id for checkpoint in stack.saver.list(thread)}
            assert len(runs) == 1, describe(stack, thread)
            wins[winner] += 1
    assert len(wins) == 2, wins  # the race is real: both processes won some
    print(f"first-run race: wins {dict(wins)}")


def test_concurrent_resumes_of_one_parked_thread(chaos_stack: ChaosStack) -> None:
    stack = chaos_stack
    gate = stack.graph("gate")
    wins: Counter[str] = Counter()
    losses: Counter[str] = Counter()
    with _Racers(stack) as racers:
        for trial in range(TRIALS):
            thread = f"race-{trial}-{uuid.uuid4().hex[:8]}"
            parked = gate.invoke({"sleep": {}}, RunnableConfig(thread_id=thread))
            assert parked.value("log") == ["a"]
            answers = racers.race("resume", thread)
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
