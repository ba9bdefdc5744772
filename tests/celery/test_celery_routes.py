"""SPEC §8: ``routes={"node": "queue"}`` sends a node's tasks to a queue served by its own
workers; routes go through ``app.conf.task_routes`` and one executor serves several graphs
(``worker/routing.py``)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from celery import Celery
from lgc_app import EXTRA_ROUTE

from celery_support import APP_MODULE, CeleryStack, subprocess_env, wait_until
from langgraph_celery import (
    END,
    START,
    CompileConfig,
    CompiledGraph,
    GraphDefinitionError,
    RunnableConfig,
    StateGraph,
)
from langgraph_celery.celery import CeleryExecutor
from langgraph_celery.checkpoint import MemorySaver
from langgraph_celery.worker.names import RESUME_TASK, celery_task_id, node_task_name
from langgraph_celery.worker.routing import NodeRouter


def test_a_routed_node_runs_only_on_the_workers_of_its_queue(
    celery_stack: CeleryStack, thread: str
) -> None:
    special = celery_stack.worker("special", queues=[celery_stack.special_queue])
    graph = celery_stack.graph("where")
    config = RunnableConfig(thread_id=thread)

    for round_ in range(3):
        state = graph.invoke({"round": round_}, config)
    ran_on = state.data["ran_on"]
    assert ran_on == [["a", "main"], ["n", "special"], ["b", "main"]] * 3

    # the result backend and the worker logs agree
    dispatched = [
        (checkpoint, task)
        for checkpoint in celery_stack.saver.list(thread)
        for task in checkpoint.tasks
    ]
    assert sorted(task.node for _, task in dispatched) == sorted(["a", "b", "n"] * 3)
    for checkpoint, task in dispatched:
        task_id = celery_task_id(checkpoint.run_id, checkpoint.checkpoint_id, task.id)
        result = celery_stack.app.AsyncResult(task_id)
        wait_until(lambda r=result: r.state == "SUCCESS", 10, 0.02, f"task {task_id}")
        expected = "special-" if task.node == "n" else "main-"
        assert result.worker.startswith(expected), (task.node, result.worker)
        assert result.queue == (
            celery_stack.special_queue if task.node == "n" else celery_stack.queue
        )
        main_log, special_log = celery_stack.workers["main"].log(), special.log()
        here, there = (special_log, main_log) if task.node == "n" else (main_log, special_log)
        assert f"[{task_id}] received" in here
        assert f"[{task_id}] received" not in there
    assert "langgraph_celery.node.where.n[" not in main_log
    assert "langgraph_celery.node.where.a[" not in special_log


def ran_on_workers(celery_stack: CeleryStack, thread: str) -> list[tuple[str, str, str]]:
    """(node, worker, queue) of each node task of ``thread``, from the result backend."""
    seen = []
    for checkpoint in celery_stack.saver.list(thread):
        for task in checkpoint.tasks:
            task_id = celery_task_id(checkpoint.run_id, checkpoint.checkpoint_id, task.id)
            result = celery_stack.app.AsyncResult(task_id)
            wait_until(lambda r=result: r.state == "SUCCESS", 10, 0.02, f"task {task_id}")
            seen.append((task.node, result.worker.split("-")[0], result.queue))
    return sorted(seen)


def test_one_executor_routes_the_nodes_of_several_graphs_with_the_apps_task_routes(
    celery_stack: CeleryStack, thread: str
) -> None:
    """Graph where-too has no node ``n`` (routed for graph where): it compiles and runs; its
    ``b`` goes where the executor's ``"where-too:b"`` key says, its ``a`` where the app's own
    ``task_routes`` send every node of where-too."""
    celery_stack.worker("special", queues=[celery_stack.special_queue])
    main, special = celery_stack.queue, celery_stack.special_queue
    state = celery_stack.graph("where-too").invoke({}, RunnableConfig(thread_id=thread))
    assert state.data["ran_on"] == [["a", "special"], ["b", "main"]]
    assert ran_on_workers(celery_stack, thread) == [("a", "special", special), ("b", "main", main)]

    other = f"{thread}-where"
    state = celery_stack.graph("where").invoke({}, RunnableConfig(thread_id=other))
    assert state.data["ran_on"] == [["a", "main"], ["n", "special"], ["b", "main"]]


def test_a_worker_refuses_to_start_while_a_route_key_names_no_node(
    celery_stack: CeleryStack, tmp_path: Path
) -> None:
    env = subprocess_env(celery_stack.settings, {EXTRA_ROUTE: "nn"})
    argv = [sys.executable, "-m", "celery", "-A", APP_MODULE, "worker", "-P", "solo"]
    argv += ["-Q", celery_stack.special_queue, "--without-gossip", "--without-mingle"]
    argv += ["--without-heartbeat", "-n", f"typo-{uuid.uuid4().hex[:8]}@%h"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "GraphDefinitionError" in output
    assert "routes key(s) 'nn' name no node of the graphs compiled with the executor" in output
    assert "graph 'where': a, n, b; graph 'where-too': a, b" in output
    assert " ready." not in output


# -- the router, without workers ---------------------------------------------------------------


def chain_graph(*nodes: str) -> StateGraph:
    graph = StateGraph()
    previous = START
    for node in nodes:
        graph.add_node(node, lambda state: None).add_edge(previous, node)
        previous = node
    return graph.add_edge(previous, END)


def compile_on(executor: CeleryExecutor, graph_id: str, *nodes: str) -> CompiledGraph:
    config = CompileConfig(checkpoint_saver=MemorySaver(), graph_id=graph_id, executor=executor)
    return chain_graph(*nodes).compile(config)


def queue_of(app: Celery, task_name: str) -> str:
    """The queue Celery's router picks for ``task_name``, as ``send_task`` asks it."""
    name: str = app.amqp.router.route({}, task_name)["queue"].name
    return name


@pytest.fixture
def app() -> Iterator[Celery]:
    app = Celery("routes-unit", broker="memory://", backend="cache+memory://", set_as_current=False)
    try:
        yield app
    finally:
        app.close()


def test_routes_go_first_in_task_routes_and_the_apps_own_routes_still_apply(app: Celery) -> None:
    app.conf.task_routes = {
        "langgraph_celery.node.two.*": {"queue": "user-q"},
        "my.task": {"queue": "mine"},
    }
    executor = CeleryExecutor(app, routes={"n": "special", "two:b": "b-q", "a": "plain-a"})
    compile_on(executor, "one", "a", "n", "b")
    compile_on(executor, "two", "a", "b")
    assert isinstance(app.conf.task_routes[0], NodeRouter)
    assert queue_of(app, node_task_name("one", "n")) == "special"
    assert queue_of(app, node_task_name("one", "a")) == "plain-a"
    assert queue_of(app, node_task_name("one", "b")) == "celery"  # the default queue
    # executor routes win for the nodes they name, the app's routes serve the others
    assert queue_of(app, node_task_name("two", "a")) == "plain-a"
    assert queue_of(app, node_task_name("two", "b")) == "b-q"
    assert queue_of(app, "my.task") == "mine"
    assert queue_of(app, RESUME_TASK) == "celery"


def test_a_qualified_key_wins_over_a_plain_one(app: Celery) -> None:
    executor = CeleryExecutor(app, routes={"b": "plain", "two:b": "qualified"})
    compile_on(executor, "one", "a", "b")
    compile_on(executor, "two", "a", "b")
    assert queue_of(app, node_task_name("one", "b")) == "plain"
    assert queue_of(app, node_task_name("two", "b")) == "qualified"


def test_routes_survive_task_routes_set_later_and_a_router_celery_already_built(
    app: Celery,
) -> None:
    assert queue_of(app, node_task_name("one", "n")) == "celery"  # Celery builds its router
    executor = CeleryExecutor(app, routes={"n": "special"})
    app.conf.task_routes = {"my.task": {"queue": "mine"}}  # the app's config, set afterwards
    compile_on(executor, "one", "a", "n")
    assert queue_of(app, node_task_name("one", "n")) == "special"
    assert queue_of(app, "my.task") == "mine"


def test_recompiling_a_graph_with_an_executor_without_routes_drops_its_routes(
    app: Celery,
) -> None:
    compile_on(CeleryExecutor(app, routes={"n": "special"}), "one", "a", "n")
    assert queue_of(app, node_task_name("one", "n")) == "special"
    compile_on(CeleryExecutor(app), "one", "a", "n")
    assert queue_of(app, node_task_name("one", "n")) == "celery"


def test_a_plain_key_may_name_a_node_of_another_graph_and_a_typo_is_reported(
    app: Celery,
) -> None:
    executor = CeleryExecutor(app, routes={"n": "special", "nn": "special"})
    compile_on(executor, "two", "a", "b")  # no n, no nn: not an error while graphs may follow
    compile_on(executor, "one", "a", "n")
    with pytest.raises(GraphDefinitionError) as caught:
        executor.check_routes()
    message = str(caught.value)
    assert "routes key(s) 'nn' name no node" in message
    assert "graph 'two': a, b; graph 'one': a, n" in message
    assert "'n'" not in message.split("checked")[0]  # n is routed: only nn is reported


def test_a_qualified_key_naming_a_missing_node_fails_that_graphs_compile(app: Celery) -> None:
    executor = CeleryExecutor(app, routes={"two:n": "special"})
    compile_on(executor, "one", "a", "n")  # the key is not about graph one
    with pytest.raises(GraphDefinitionError) as caught:
        compile_on(executor, "two", "a", "b")
    assert str(caught.value) == (
        "CeleryExecutor routes key 'two:n' names node 'n' of graph 'two', which has no such "
        "node (its nodes: a, b); fix the key"
    )
    assert node_task_name("two", "a") not in app.tasks


def test_routes_with_no_graph_compiled_are_reported(app: Celery) -> None:
    executor = CeleryExecutor(app, routes={"n": "special"})
    with pytest.raises(GraphDefinitionError, match="no graph is compiled with the executor"):
        executor.check_routes()
    CeleryExecutor(app).check_routes()  # no routes: nothing to report
