"""Random graphs described as data, and the interpreter that builds a :class:`StateGraph` from one.

:func:`spec_from_seed` draws a graph *spec* (a JSON-able dict) from ``random.Random(seed)``;
:func:`build` turns any spec into a graph.  The test process and the fuzz workers call both with
the same seeds, so a seed names the same graph everywhere: the workers compile seeds
``0..N-1`` at import (``fuzz_app``) and the tests compile the same seed in process to compare.

A spec::

    {
      "nodes": [{"id": "n0", "ops": [["add", 2], ["set", "x0", 3]], "async": false,
                 "stream": 0}, ...],
      "start": {"kind": "edges", "targets": ["n0"]} | a route (see below),
      "out": {"n0": {"kind": "edges", "targets": ["n1", "n2"]}, "n1": <route>, ...},
      "joins": [[["n1", "n2"], "n3"], ...],
      "interrupt_before": [...], "interrupt_after": [...], "interrupt_before_edge": bool,
      "recursion_limit": int,
      "merged": "n1" | None, "merged_check": bool,
      "compiled": "n2" | None, "compiled_check": bool,
    }

``merged`` names a node built as a merged subgraph (SPEC §9, ``add_node(id, StateGraph)``):
its ops run in the child's node ``body`` (merged as ``"<id>-body"``), followed, with
``merged_check``, by a node ``check`` that logs ``"<id>/check"``; edges, joins, routes and
interrupts that name the node reach the subgraph (an ``interrupt_after`` names its last node).
It is drawn from a generator of its own, so the rest of a seed's graph is as before.

``compiled`` (drawn from a third generator, never the merged node) names a node built as a
compiled subgraph (``add_node(id, CompiledGraph)``): the same child (``body`` [-> ``check``])
compiled without a saver (the parent's serves it); its nodes stream and interrupt as the
child's, with the child's node ids; ``interrupt_after`` names the subgraph node itself.

Every node appends its id to ``log`` and applies its ops, each a deterministic function of the
state it is given (``s``) and of the config's metadata:

``["add", k]``        ``total`` (a summing reducer) += ``k + len(log) % 3``; ``trail``
                      (``operator.add`` on a list) += ``[total]``; ``tally`` (a dict reducer)
                      sets ``node: total``
``["set", key, m]``   overwrite ``key`` with ``total * m + len(log)``
``["text", key]``     overwrite ``key`` with ``"<node>@<len(log)>"``
``["rich", key]``     overwrite ``key`` with a tuple, bytes, a date and a frozenset
``["tag", key]``      overwrite ``key`` with ``"<metadata tag>/<config.node_id>"``
``["drop", key]``     delete ``key`` (``MARK_FOR_REMOVAL``)
``["unlog", node]``   ``log``: remove the first ``node`` (``RemoveByHash``) before appending;
                      ``tally``: remove the entry ``start<len(log) % 6>`` (it starts with
                      ``start0`` to ``start5``)
``["result"]``        ``results`` (appender) += ``[item * 10 + total]`` (``item`` from a Send)
``["reset"]``         ``results`` = ``ReplaceAllWith([len(log)])``
``["gate"]``          raise ``GraphInterrupt`` unless ``approved`` is truthy
``["boom", mod]``     raise ``ValueError`` when ``total % mod == mod - 1``

A node with ``"stream": k > 0`` is a streaming node: it returns its update through a generator
(an async generator ending with ``Done`` when the node is async) that first yields ``k`` chunks
``"<node>:<total>:<len(log)>:<item>:<i>"`` (``i`` from 0).

Routes (a conditional edge leaving a node, or START):

``{"kind": "parity", "even": A, "odd": B}``            by ``total % 2``
``{"kind": "visits", "limit": n, "loop": A, "exit": B}`` ``loop`` while the source ran < n times
``{"kind": "fanout", "targets": [A, B, ...]}``         a list of labels chosen by ``total``
``{"kind": "command", "targets": [...], "key": k}``    ``Command(goto=..., update={k: ...})``
``{"kind": "send", "node": W}``                        ``Send(W, {"item": i})`` per input item

or, leaving a node, ``{"kind": "goto", "targets": [...], "key": k}``: the node is a command node
(``add_node(..., destinations=targets)``) returning ``Command(goto=..., update=...)``: its update
plus ``{k: "goto:<node>:<target>"}``, going to ``targets[total % len(targets)]``.
"""

from __future__ import annotations

import operator
import random
from collections.abc import Callable, Mapping
from datetime import date
from typing import Any

from langgraph_celery import (
    END,
    MARK_FOR_REMOVAL,
    START,
    AgentState,
    Channel,
    Channels,
    Command,
    Done,
    GraphInterrupt,
    RemoveByHash,
    ReplaceAllWith,
    Send,
    StateGraph,
)

Spec = dict[str, Any]

#: The node ids of a compiled subgraph's child (streamed with these ids, as the child's).
CHILD_NODES = ("body", "check")

#: Overwrite keys (no reducer): two nodes of one step writing the same one is an error.
SHARED_KEYS = ("x0", "x1")


def _tally(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A dict reducer, as agents keep files: entries set by name, ``None`` removes one."""
    merged = {**old, **new}
    return {name: value for name, value in merged.items() if value is not None}


def schema() -> dict[str, Channel]:
    return {
        "log": Channels.appender(),
        "results": Channels.appender(),
        "total": Channel(operator.add, 0),
        "trail": Channel(operator.add, list),
        # (starting with entries, so that a node's entry is stored as a change of the dict)
        "tally": Channel(_tally, lambda: {f"start{i}": i for i in range(6)}),
    }


# -- drawing a spec -------------------------------------------------------------------------------


def spec_from_seed(seed: int) -> Spec:
    """The spec of graph ``seed``: the same on every process and Python run."""
    rng = random.Random(f"lgc-fuzz-{seed}")
    count = rng.randint(2, 6)
    ids = [f"n{i}" for i in range(count)]
    # a spanning tree from START, so that every node is reachable
    children: dict[str, list[str]] = {START: [], **{node: [] for node in ids}}
    for index, node in enumerate(ids):
        parent = START if index == 0 else rng.choice([START, *ids[:index]])
        children[parent].append(node)
    joins: list[list[Any]] = []
    if count >= 3 and rng.random() < 0.35:
        target_index = rng.randint(2, count - 1)
        sources = rng.sample(ids[:target_index], 2)
        joins.append([sorted(sources), ids[target_index]])
    send_targets: set[str] = set()
    out: dict[str, Any] = {}
    start: dict[str, Any] = {}
    for source in [START, *ids]:
        targets = list(children[source])
        later = ids[ids.index(source) + 1 :] if source != START else ids
        if source != START and (not targets or rng.random() < 0.25):
            extra = rng.choice([*later, END, END]) if later else END
            if extra not in targets:
                targets.append(extra)
        if source != START and not targets:
            targets = [END]
        joined = any(source in sources for sources, _ in joins)
        edge = _draw_edge(rng, source, targets, ids, send_targets, goto=not joined)
        if edge["kind"] != "edges" and rng.random() < 0.1:
            edge["boom"] = rng.choice([3, 4])
        if source == START:
            start = edge
        else:
            out[source] = edge
    gates = set()
    nodes = []
    with_gate = rng.random() < 0.3
    for node in ids:
        ops = _draw_ops(rng, node, ids)
        if with_gate and node not in send_targets and not gates and rng.random() < 0.4:
            ops.insert(0, ["gate"])
            gates.add(node)
        elif not with_gate and rng.random() < 0.12:
            # (not with a gate: a step where one node fails and another parks is reported as
            # parked in process, but as whichever marker a Celery client reads first)
            ops.append(["boom", rng.choice([3, 4, 5])])
        is_command = out[node]["kind"] == "goto"
        streams = rng.randint(1, 3) if not is_command and rng.random() < 0.3 else 0
        nodes.append({"id": node, "ops": ops, "async": rng.random() < 0.3, "stream": streams})
    interrupt_before = [rng.choice(ids)] if rng.random() < 0.3 else []
    interrupt_after = [rng.choice(ids)] if rng.random() < 0.3 else []
    candidates = [n for n in ids if n not in send_targets and out[n]["kind"] != "goto"]
    merged = _draw_merged(seed, candidates)
    return {
        "seed": seed,
        "nodes": nodes,
        "start": start,
        "out": out,
        "joins": joins,
        "interrupt_before": interrupt_before,
        "interrupt_after": interrupt_after,
        "interrupt_before_edge": bool(interrupt_after) and rng.random() < 0.5,
        "recursion_limit": rng.choice([8, 12, 25]),
        **merged,
        **_draw_compiled(seed, [n for n in candidates if n != merged["merged"]]),
    }


def _draw_merged(seed: int, candidates: list[str]) -> dict[str, Any]:
    """Which node (not one a Send reaches, nor a command node) is a merged subgraph, if any."""
    rng = random.Random(f"lgc-fuzz-merged-{seed}")
    merged = rng.choice(candidates) if candidates and rng.random() < 0.4 else None
    return {"merged": merged, "merged_check": rng.random() < 0.5}


def _draw_edge(
    rng: random.Random,
    source: str,
    targets: list[str],
    ids: list[str],
    sends: set[str],
    goto: bool,
) -> dict[str, Any]:
    nodes = [t for t in targets if t != END]
    roll = rng.random()
    if len(targets) == 1 and nodes and source != START and roll < 0.2:
        sends.add(nodes[0])
        return {"kind": "send", "node": nodes[0]}
    if len(targets) == 1 and source != START and roll < 0.4:
        back = ids[: ids.index(source) + 1]
        return {"kind": "visits", "limit": rng.randint(1, 3), "loop": rng.choice(back),
                "exit": targets[0]}  # fmt: skip
    if len(targets) <= 2 and roll < 0.6:
        other = targets[1] if len(targets) == 2 else rng.choice([END, targets[0]])
        pair = [targets[0], other]
        rng.shuffle(pair)
        return {"kind": "parity", "even": pair[0], "odd": pair[1]}
    if roll < 0.72:
        return {"kind": "fanout", "targets": targets}
    if roll < 0.8:
        return {"kind": "command", "targets": targets, "key": rng.choice(SHARED_KEYS)}
    if roll < 0.9 and goto and source != START:
        return {"kind": "goto", "targets": targets, "key": rng.choice(SHARED_KEYS)}
    return {"kind": "edges", "targets": targets}


def _draw_ops(rng: random.Random, node: str, ids: list[str]) -> list[list[Any]]:
    ops: list[list[Any]] = []
    for _ in range(rng.randint(0, 3)):
        kind = rng.choice(["add", "add", "set", "text", "rich", "tag", "drop", "unlog", "result",
                           "reset"])  # fmt: skip
        key = rng.choice([*SHARED_KEYS, f"own_{node}", f"own_{node}"])
        if kind == "add":
            ops.append(["add", rng.randint(0, 3)])
        elif kind == "set":
            ops.append(["set", key, rng.randint(1, 3)])
        elif kind in ("text", "rich", "tag", "drop"):
            ops.append([kind, key])
        elif kind == "unlog":
            ops.append(["unlog", rng.choice(ids)])
        else:
            ops.append([kind])
    return ops


# -- building a graph from a spec ------------------------------------------------------------------


def _values(state: Any) -> Mapping[str, Any]:
    return state.data if isinstance(state, AgentState) else state


def _update(node: str, ops: list[list[Any]], state: Any, config: Any) -> dict[str, Any]:
    s = _values(state)
    log = list(s.get("log") or [])
    total = int(s.get("total") or 0)
    update: dict[str, Any] = {}
    log_update: list[Any] = []
    for op in ops:
        kind = op[0]
        if kind == "gate":
            if not s.get("approved"):
                raise GraphInterrupt(f"gate {node}", {"node": node, "seen": len(log)})
        elif kind == "boom":
            if total % op[1] == op[1] - 1:
                raise ValueError(f"boom in {node} at total {total}")
        elif kind == "add":
            update["total"] = update.get("total", 0) + op[1] + len(log) % 3
            update["trail"] = [*update.get("trail", []), total]
            update["tally"] = {**update.get("tally", {}), node: total}
        elif kind == "set":
            update[op[1]] = total * op[2] + len(log)
        elif kind == "text":
            update[op[1]] = f"{node}@{len(log)}"
        elif kind == "rich":
            update[op[1]] = {
                "pair": (node, len(log)),
                "raw": node.encode(),
                "day": date(2024, 1, 1 + len(log) % 28),
                "seen": frozenset(log),
            }
        elif kind == "tag":
            update[op[1]] = f"{config.metadata.get('tag')}/{config.node_id}"
        elif kind == "drop":
            update[op[1]] = MARK_FOR_REMOVAL
        elif kind == "unlog":
            log_update.append(RemoveByHash(op[1]))
            update["tally"] = {**update.get("tally", {}), f"start{len(log) % 6}": None}
        elif kind == "result":
            update["results"] = [int(s.get("item") or 0) * 10 + total]
        elif kind == "reset":
            update["results"] = ReplaceAllWith([len(log)])
    update["log"] = [*log_update, node]
    return update


def _chunks(node: str, count: int, state: Any) -> list[str]:
    s = _values(state)
    total, seen, item = int(s.get("total") or 0), len(s.get("log") or []), s.get("item")
    return [f"{node}:{total}:{seen}:{item}:{index}" for index in range(count)]


def _node(node: str, ops: list[list[Any]], is_async: bool, streams: int) -> Callable[..., Any]:
    if is_async and streams:

        async def async_streaming(state: Any, config: Any) -> dict[str, Any]:
            update = _update(node, ops, state, config)

            async def chunks() -> Any:
                for chunk in _chunks(node, streams, state):
                    yield chunk
                yield Done(update)

            return {"out": chunks()}

        return async_streaming
    if streams:

        def streaming(state: Any, config: Any) -> dict[str, Any]:
            update = _update(node, ops, state, config)

            def chunks() -> Any:
                yield from _chunks(node, streams, state)
                return update

            return {"out": chunks()}

        return streaming
    if is_async:

        async def async_action(state: Any, config: Any) -> dict[str, Any]:
            return _update(node, ops, state, config)

        return async_action

    def action(state: Any, config: Any) -> dict[str, Any]:
        return _update(node, ops, state, config)

    return action


def _command_node(
    node: str, ops: list[list[Any]], is_async: bool, edge: Mapping[str, Any]
) -> Callable[..., Any]:
    targets = list(edge["targets"])

    def command(state: Any, config: Any) -> Command:
        update = _update(node, ops, state, config)
        goto = targets[int(_values(state).get("total") or 0) % len(targets)]
        return Command(goto=goto, update={**update, edge["key"]: f"goto:{node}:{goto}"})

    if is_async:

        async def async_command(state: Any, config: Any) -> Command:
            return command(state, config)

        return async_command
    return command


def _route(source: str, edge: Mapping[str, Any]) -> tuple[Callable[..., Any], Any]:
    """The route function and its mapping for a conditional edge of the spec; with ``"boom":
    mod`` it raises ``ValueError`` when ``total % mod == mod - 1``."""
    route, mapping = _plain_route(source, edge)
    mod = edge.get("boom")
    if mod is None:
        return route, mapping

    def failing(s: AgentState) -> Any:
        if int(s.value("total") or 0) % mod == mod - 1:
            raise ValueError(f"route from {source} fails at total {s.value('total')}")
        return route(s)

    return failing, mapping


def _plain_route(source: str, edge: Mapping[str, Any]) -> tuple[Callable[..., Any], Any]:
    kind = edge["kind"]

    def total(state: AgentState) -> int:
        return int(state.value("total") or 0)

    if kind == "parity":
        return (lambda s: "even" if total(s) % 2 == 0 else "odd"), {
            "even": edge["even"],
            "odd": edge["odd"],
        }
    if kind == "visits":

        def visits(s: AgentState) -> str:
            return "loop" if list(s.value("log") or []).count(source) < edge["limit"] else "exit"

        return visits, {"loop": edge["loop"], "exit": edge["exit"]}
    targets = list(edge.get("targets", ()))
    if kind == "fanout":

        def fanout(s: AgentState) -> list[str]:
            chosen = [t for i, t in enumerate(targets) if (total(s) + i) % 3 != 0]
            return chosen or targets[:1]

        return fanout, {t: t for t in targets}
    if kind == "command":

        def command(s: AgentState) -> Command:
            goto = targets[total(s) % len(targets)]
            return Command(goto=goto, update={edge["key"]: f"cmd:{source}:{goto}"})

        return command, {t: t for t in targets}
    if kind == "send":

        def send(s: AgentState) -> list[Send]:
            return [Send(edge["node"], {"item": item}) for item in s.value("items") or []]

        return send, None
    raise ValueError(f"unknown route kind {kind!r}")


def _draw_compiled(seed: int, candidates: list[str]) -> dict[str, Any]:
    """Which node (not one a Send reaches, a command node, nor the merged one) is a compiled
    subgraph, if any."""
    rng = random.Random(f"lgc-fuzz-compiled-{seed}")
    compiled = rng.choice(candidates) if candidates and rng.random() < 0.4 else None
    return {"compiled": compiled, "compiled_check": rng.random() < 0.5}


def _merged_last(spec: Mapping[str, Any]) -> str:
    """The merged id of the last node of the spec's merged subgraph."""
    return f"{spec['merged']}-{'check' if spec['merged_check'] else 'body'}"


def _subgraph(node: str, action: Callable[..., Any], check: bool) -> StateGraph:
    """START -> body (``action``) [-> check] -> END, on the same schema."""
    child = StateGraph(schema()).add_node("body", action).add_edge(START, "body")
    if not check:
        return child.add_edge("body", END)
    child.add_node("check", lambda state: {"log": [f"{node}/check"]})
    return child.add_edge("body", "check").add_edge("check", END)


def build(spec: Mapping[str, Any]) -> StateGraph:
    """The graph that ``spec`` describes (not compiled)."""
    graph = StateGraph(schema())
    out = spec["out"]
    for node in spec["nodes"]:
        name, ops, is_async = node["id"], node["ops"], node["async"]
        edge = out.get(name)
        if edge is not None and edge["kind"] == "goto":
            command = _command_node(name, ops, is_async, edge)
            graph.add_node(name, command, destinations=list(edge["targets"]))
            continue
        action = _node(name, ops, is_async, node.get("stream", 0))
        if name == spec.get("merged"):
            graph.add_node(name, _subgraph(name, action, spec["merged_check"]))
        elif name == spec.get("compiled"):
            child = _subgraph(name, action, spec["compiled_check"])
            graph.add_node(name, child.compile())
        else:
            graph.add_node(name, action)
    for source, edge in [(START, spec["start"]), *out.items()]:
        if edge["kind"] == "goto":
            continue  # (the command node's destinations)
        if edge["kind"] == "edges":
            for target in edge["targets"]:
                graph.add_edge(source, target)
        else:
            route, mapping = _route(source, edge)
            graph.add_conditional_edges(source, route, mapping)
    for sources, target in spec["joins"]:
        graph.add_edge(list(sources), target)
    return graph


def compile_options(spec: Mapping[str, Any]) -> dict[str, Any]:
    """``CompileConfig`` keywords of the spec (besides saver, executor and graph id)."""
    return {
        "interrupt_before": tuple(spec["interrupt_before"]),
        "interrupt_after": tuple(
            _merged_last(spec) if node == spec.get("merged") else node
            for node in spec["interrupt_after"]
        ),
        "interrupt_before_edge": spec["interrupt_before_edge"],
        "recursion_limit": spec["recursion_limit"],
    }


def graph_id(seed: int) -> str:
    return f"fuzz-{seed}"
