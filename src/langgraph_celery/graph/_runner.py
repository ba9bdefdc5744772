"""Calling user code for one task: the node action (or route) inside its hooks.

This is where plain and async callables meet: a chain of plain hooks around a plain action runs
as plain calls (inline, or in a thread when the step runs several tasks); as soon as anything in
the chain is async the chain is awaited, a plain wrap hook around an async action getting a
plain ``action`` that runs the async one on the event loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Executor, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from functools import partial
from typing import Any

from langgraph_celery._clone import clone_value
from langgraph_celery.checkpoint.base import BaseCheckpointSaver, PendingTask
from langgraph_celery.errors import InvalidUpdateError
from langgraph_celery.graph._algo import GOTO, check_update, command_write
from langgraph_celery.graph._callables import CallableSpec, is_async_callable
from langgraph_celery.graph._spec import GraphSpec, Hook
from langgraph_celery.graph._streaming import resolve, streaming_key
from langgraph_celery.graph._sync import SHARED_POOL
from langgraph_celery.graph.config import RunnableConfig
from langgraph_celery.graph.state import AgentState, CopyOnRead, apply_update, compose_updates
from langgraph_celery.graph.types import Command

__all__ = ["ASYNC_VARIANT", "TaskRunner", "clone_value"]

#: A hook object may carry an async twin of itself under this attribute; it is used when the
#: action it wraps is async (RetryPolicy's hook does, so it sleeps without blocking the loop).
ASYNC_VARIANT = "__lgc_async_variant__"

SyncAction = Callable[[Any, RunnableConfig], Any]
AsyncAction = Callable[[Any, RunnableConfig], Awaitable[Any]]


async def _resolve(value: Any) -> Any:
    while inspect.isawaitable(value):
        value = await value
    return value


class _Chain:
    """The hooks of one node (or one route), in the order they run."""

    def __init__(
        self,
        hooks: list[Hook],
        action: CallableSpec,
        timeout: float | None = None,
        *,
        route: bool = False,
    ) -> None:
        #: the chain of a conditional edge's route (its hooks are edge hooks)
        self.route = route
        self.before = [hook.fn for hook in reversed(hooks) if hook.kind.startswith("before")]
        self.after = [hook.fn for hook in reversed(hooks) if hook.kind.startswith("after")]
        self.wrap = [hook.fn for hook in hooks if hook.kind.startswith("wrap")]
        self.action = action
        #: the limit of each call of the action (inside the wrap hooks, so a RetryPolicy's
        #: attempts are timed one by one)
        self.timeout = timeout
        self.is_sync = not action.is_async and not any(map(is_async_callable, self.wrap))
        #: whether anything in the chain gets the config, and so may stream with ``emit``
        self.gets_config = action.takes_config or bool(hooks)
        #: every wrap hook has an async twin (RetryPolicy's) and the action no time limit (whose
        #: overrunning calls keep threads of their own): a plain action run on a thread is then
        #: called attempt by attempt from the loop, which waits out the back-off, so the wait
        #: never holds the node's thread (or its executor)
        self.waits_on_loop = (
            timeout is None
            and bool(self.wrap)
            and all(getattr(hook, ASYNC_VARIANT, None) is not None for hook in self.wrap)
        )

    def sync_call(self, node: str) -> SyncAction:
        action, timeout = self.action, self.timeout

        call: SyncAction = action.call
        if timeout is not None:

            def call(state: Any, config: RunnableConfig) -> Any:
                future = _TIMED_POOL.submit(action.call, state, config)
                try:
                    return future.result(timeout)
                except FutureTimeout:
                    raise _timed_out(node, timeout) from None

        for hook in reversed(self.wrap):
            call = _wrap_sync(hook, node, call)
        return call

    def async_call(self, node: str, executor: Executor | None, threaded: bool) -> AsyncAction:
        action, timeout = self.action, self.timeout

        async def untimed(state: Any, config: RunnableConfig) -> Any:
            if action.is_async or not (threaded or timeout is not None):
                return await _resolve(action.call(state, config))
            loop = asyncio.get_running_loop()
            context = contextvars.copy_context()  # (the caller's context, in the thread too)
            call = partial(context.run, action.call, state, config)
            return await _resolve(await loop.run_in_executor(executor or SHARED_POOL, call))

        async def call(state: Any, config: RunnableConfig) -> Any:
            if timeout is None:
                return await untimed(state, config)
            try:
                return await asyncio.wait_for(untimed(state, config), timeout)
            except TimeoutError:
                raise _timed_out(node, timeout) from None

        inner_async: AsyncAction = call
        for hook in reversed(self.wrap):
            inner_async = _wrap_async(hook, node, inner_async)
        return inner_async


#: Threads for the plain actions of nodes with a timeout: one that overruns keeps its thread
#: until it returns (a thread cannot be stopped), while its node has already failed.
_TIMED_POOL = ThreadPoolExecutor(max_workers=32, thread_name_prefix="langgraph-celery-timed")


def _timed_out(node: str, timeout: float) -> TimeoutError:
    return TimeoutError(f"node {node!r} did not finish within its timeout of {timeout:g} s")


def _wrap_sync(hook: Callable[..., Any], node: str, inner: SyncAction) -> SyncAction:
    def call(state: Any, config: RunnableConfig) -> Any:
        return hook(node, state, config, inner)

    return call


def _wrap_async(hook: Callable[..., Any], node: str, inner: AsyncAction) -> AsyncAction:
    variant = getattr(hook, ASYNC_VARIANT, None)
    if variant is not None:
        hook = variant
    if is_async_callable(hook):

        async def call_async(state: Any, config: RunnableConfig) -> Any:
            return await _resolve(hook(node, state, config, inner))

        return call_async

    async def call_plain(state: Any, config: RunnableConfig) -> Any:
        loop = asyncio.get_running_loop()

        def plain_action(inner_state: Any, inner_config: RunnableConfig) -> Any:
            future = asyncio.run_coroutine_threadsafe(
                _resolve(inner(inner_state, inner_config)), loop
            )
            return future.result()

        result = await loop.run_in_executor(SHARED_POOL, hook, node, state, config, plain_action)
        return await _resolve(result)

    return call_plain


def _hook_update(node: str, update: Any, route: bool = False) -> dict[str, Any] | None:
    """A before-call hook's return value as an update, or :class:`InvalidUpdateError`.

    A before-call edge hook (``route``) may also return a ``Command`` without a ``goto``, whose
    update is the update, as LangGraph4j's ``EdgeHook.BeforeCall`` does."""
    if route and isinstance(update, Command):
        goto = update.goto
        if not (goto is None or (isinstance(goto, tuple | list) and not goto)):
            raise InvalidUpdateError(
                f"a before-call edge hook of {node!r} returned a Command with goto {goto!r}; "
                "it can only give the route an update: change where the edge goes in an "
                "after-call or wrap-call edge hook"
            )
        update = update.update
    if update is None:
        return None
    if not isinstance(update, Mapping):
        raise InvalidUpdateError(
            f"a before-call hook of {node!r} returned {type(update).__name__}; it must return a "
            "mapping of state updates or None"
        )
    for key in update:
        if not isinstance(key, str):
            raise InvalidUpdateError(
                f"a before-call hook of {node!r} returned an update with non-string key "
                f"{key!r}; state keys are strings"
            )
    return dict(update)


def _executor_for(spec: GraphSpec, node: str, executors: Mapping[str, Executor]) -> Executor | None:
    """The executor ``node`` runs on in process: the one given for the node itself, else, as
    LangGraph4j's ``addParallelNodeExecutor(source, executor)``, the one given for the source
    (``START`` included) of a fan-out the node is a branch of."""
    if not executors:
        return None
    executor = executors.get(node)
    if executor is None:
        for source in spec.fan_out_sources.get(node, ()):
            executor = executors.get(source)
            if executor is not None:
                break
    return executor


class TaskRunner:
    """Runs node tasks and routes of one graph with their hooks, as both executors need."""

    def __init__(
        self,
        spec: GraphSpec,
        saver: BaseCheckpointSaver | None = None,
        graph_id: str | None = None,
    ) -> None:
        self.spec = spec
        nodes = dict(spec.nodes)
        for node in spec.subgraphs:
            # a compiled subgraph runs its child runs with this graph's schema and saver
            subgraph: Any = nodes[node].fn  # (a _subgraph.SubgraphNode)
            nodes[node] = CallableSpec.of(subgraph.bound(spec.schema, saver, graph_id))
        self._nodes = {
            node: _Chain(self._hooks_for(node, "node"), action, spec.timeouts.get(node))
            for node, action in nodes.items()
        }
        self._routes = {
            source: _Chain(self._hooks_for(source, "edge"), edge.route, route=True)
            for source, edge in spec.conditional.items()
        }

    def _hooks_for(self, target: str, kind: str) -> list[Hook]:
        return [
            hook
            for hook in self.spec.hooks
            if hook.kind.endswith(kind) and (hook.target is None or hook.target == target)
        ]

    def make_state(self, data: Any, clone: bool) -> Any:
        """What a node gets: with ``clone``, a copy of ``data`` (a state: made as it reads)."""
        if not isinstance(data, Mapping):
            return clone_value(data) if clone else data
        return self.spec.state_factory(CopyOnRead(data) if clone else data)

    async def _before(
        self, chain: _Chain, node: str, state: Any, config: RunnableConfig
    ) -> tuple[Any, dict[str, Any] | None]:
        """Run the before-call hooks (last added first): the state the action sees, each hook's
        update merged in, and those updates as one (``None`` when no hook returned one)."""
        schema = self.spec.schema
        combined: dict[str, Any] | None = None
        for hook in chain.before:
            update = _hook_update(node, await _resolve(hook(node, state, config)), chain.route)
            if update is None:
                continue
            combined = update if combined is None else compose_updates(schema, combined, update)
            held = state._data if isinstance(state, AgentState) else state
            data = held.copy() if type(held) is CopyOnRead else dict(held)
            apply_update(schema, data, clone_value(update) if config.clone_state else update)
            state = self.spec.state_factory(data)
        return state, combined

    async def _run(
        self,
        chain: _Chain,
        node: str,
        state: Any,
        config: RunnableConfig,
        executor: Executor | None,
        threaded: bool,
    ) -> tuple[Any, dict[str, Any] | None]:
        """Call ``chain``'s action inside its hooks: what the after-call hooks made of the
        result, and the before-call hooks' updates (``None`` if none returned one)."""
        before_update = None
        if chain.before:
            state, before_update = await self._before(chain, node, state, config)
        if chain.is_sync and not (threaded and chain.waits_on_loop):
            call = chain.sync_call(node)
            if threaded or chain.timeout is not None:
                loop = asyncio.get_running_loop()
                context = contextvars.copy_context()  # (the caller's context, in the thread too)
                result = await loop.run_in_executor(
                    executor or SHARED_POOL, partial(context.run, call, state, config)
                )
            else:
                result = call(state, config)
            result = await _resolve(result)
        else:
            result = await chain.async_call(node, executor, threaded)(state, config)
        key = streaming_key(node, result)
        if key is not None:
            # a streaming node: after-call hooks see its final update, never the generator
            result = await resolve(node, result, key, config, self.spec.schema)
        for hook in chain.after:
            result = await _resolve(hook(node, state, config, result))
        return result, before_update

    def may_emit(self, node: str) -> bool:
        """Whether ``node`` (its action or a hook of it) gets the config, and so may stream
        with ``config.emit`` while it runs."""
        return self._nodes[node].gets_config

    async def run_task(
        self,
        task: PendingTask,
        values: Mapping[str, Any],
        config: RunnableConfig,
        *,
        threaded: bool = False,
    ) -> dict[str, Any] | None:
        """Run one node task; returns its update (checked, its before-call hooks' updates
        included; for a command node, with where its Command goes under ``_algo.GOTO``) or
        raises what the node raised."""
        node = task.node
        state = self.make_state(task.arg if task.has_arg else values, config.clone_state)
        node_config = config._for_runtime(node_id=node, stream_state=state, task_id=task.id)
        executor = _executor_for(self.spec, node, config.parallel_executors)
        result, before_update = await self._run(
            self._nodes[node], node, state, node_config, executor, threaded or executor is not None
        )
        goto: list[Any] | None = None
        if isinstance(result, Command):
            write = command_write(self.spec, node, result)
            goto = write.pop(GOTO)
            update: dict[str, Any] | None = write
        else:
            update = check_update(node, result)
        if before_update is not None:
            # As in LangGraph4j, the before-call hooks' updates are part of the node's: they are
            # merged first, then what the node (through its wrap and after-call hooks) returned.
            update = compose_updates(self.spec.schema, before_update, update or {})
        typed = self.spec.typed
        if typed is not None and update:
            update = typed.check_update(node, update, self.spec.schema)
        if goto is not None:
            # where the Command goes travels with the update, as data (see _algo.GOTO)
            return {**(update or {}), GOTO: goto}
        return update

    async def before_node(
        self, node: str, values: Mapping[str, Any], config: RunnableConfig
    ) -> dict[str, Any]:
        """The state ``node``'s before-call hooks make of ``values``, for a node whose action
        runs elsewhere (a compiled subgraph's child run, on Celery)."""
        chain = self._nodes[node]
        state = self.make_state(values, config.clone_state)
        if chain.before:
            node_config = config._for_runtime(node_id=node, stream_state=state)
            state, _ = await self._before(chain, node, state, node_config)
        return dict(state.data if isinstance(state, AgentState) else state)

    async def after_node(
        self,
        node: str,
        values: Mapping[str, Any],
        config: RunnableConfig,
        update: Mapping[str, Any],
    ) -> dict[str, Any] | None:
        """What ``node``'s after-call hooks make of its ``update`` (see :meth:`before_node`)."""
        chain = self._nodes[node]
        if not chain.after:
            return dict(update)
        state = self.make_state(values, config.clone_state)
        node_config = config._for_runtime(node_id=node, stream_state=state)
        result: Any = dict(update)
        for hook in chain.after:
            result = await _resolve(hook(node, state, node_config, result))
        return check_update(node, result)

    async def run_route(
        self, source: str, values: Mapping[str, Any], config: RunnableConfig
    ) -> Any:
        """Call the conditional edge leaving ``source`` with the merged state.

        Before-call edge hooks' updates only reach the state the route sees (as in
        LangGraph4j); what reaches the run's state is the ``Command`` update the route (or an
        after-call edge hook) returns."""
        state = self.spec.state_factory(values)
        route_config = config._for_runtime(node_id=source, stream_state=state)
        result, _ = await self._run(self._routes[source], source, state, route_config, None, False)
        return result

    def interruptible(self, node: str) -> Any:
        """The node's action if it implements ``InterruptibleAction``, else ``None``."""
        fn = self.spec.nodes[node].fn
        return fn if callable(getattr(fn, "interrupt", None)) else None
