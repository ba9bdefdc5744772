"""In-process benchmark: langgraph_celery against LangGraph on identical graphs.

Both libraries run side by side in one process, on graphs with the same nodes (the very same
Python functions), the same edges, the same reducers and the same input:

* ``chain``: a 100-node chain; each node adds 1 to ``count`` (reducer: ``operator.add``) and
  sets ``last`` (no reducer) to its index.  No checkpointer.
* ``chain_ckpt``: the same chain with an in-memory checkpointer (our ``MemorySaver``, LangGraph's
  ``InMemorySaver``) and a fresh thread id for every invoke.
* ``fanout``: ``START -> a -> b1..b10 (parallel) -> c (join) -> END``, plain (sync) nodes; every
  node adds to ``total`` (reducer: ``operator.add``), so the merge of the parallel step is
  exercised; ``c`` also sets ``joined``.  No checkpointer.

Before timing, each scenario is run once by both libraries and the final states are asserted to
be equal (and equal to the expected value).  Timing: a warm-up, then ``rounds`` rounds; in each
round each library runs ``invokes`` invokes back to back (the order of the two alternates from
round to round), on an app compiled afresh for the round (so checkpoint stores never grow across
rounds) and warmed by one untimed invoke.  A round gives a per-invoke time (``perf_counter``); the
figure reported is the median over the rounds.  The garbage collector stays enabled; a
``gc.collect()`` runs before each timed batch, outside the timed region, so neither library pays
for the other's garbage.

A *step* in ``µs/step`` is one node execution (task): 100 per invoke for the chains, 12 for the
fan-out (which runs them in 3 supersteps).

Run ``python -m bench.inprocess`` (``--quick`` for a smoke run, ``--json PATH`` to save the
figures, ``--profile SCENARIO`` for a cProfile of one library on one scenario).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import math
import operator
import platform
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as dist_version
from pathlib import Path
from typing import Annotated, Any, Protocol, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END as LG_END
from langgraph.graph import START as LG_START
from langgraph.graph import StateGraph as LGStateGraph

from langgraph_celery import END, START, Channel, CompileConfig, RunnableConfig, StateGraph
from langgraph_celery.checkpoint import MemorySaver

TARGET_GEOMEAN = 0.5
CHAIN_LENGTH = 100
FAN_WIDTH = 10
#: Generous for both libraries (their defaults are 25); a chain of 100 needs about 100.
RECURSION_LIMIT = 1_000

Update = dict[str, Any]


class NodeFn(Protocol):
    """A node: gets the state (a dict in LangGraph, an AgentState in ours), returns an update."""

    def __call__(self, state: Any) -> Update: ...


class Invoke(Protocol):
    def __call__(self, input: Any, config: Any) -> Any: ...


# -- state schemas (LangGraph side; ours are Channel mappings built below) ---------------------


class ChainState(TypedDict):
    count: Annotated[int, operator.add]
    last: int


class FanState(TypedDict):
    total: Annotated[int, operator.add]
    joined: bool


def _chain_schema() -> dict[str, Channel]:
    return {"count": Channel(operator.add, default=0)}


def _fan_schema() -> dict[str, Channel]:
    return {"total": Channel(operator.add, default=0)}


# -- node functions, shared by both libraries ----------------------------------------------------


def _chain_node(index: int) -> NodeFn:
    def node(state: Any) -> Update:
        return {"count": 1, "last": index}

    return node


def _add_node(amount: int) -> NodeFn:
    def node(state: Any) -> Update:
        return {"total": amount}

    return node


def _join_node(state: Any) -> Update:
    return {"total": 1_000, "joined": True}


CHAIN_NODES: list[tuple[str, NodeFn]] = [(f"n{i}", _chain_node(i)) for i in range(CHAIN_LENGTH)]
FAN_NODES: list[tuple[str, NodeFn]] = [
    ("a", _add_node(1)),
    *((f"b{i}", _add_node(i)) for i in range(1, FAN_WIDTH + 1)),
    ("c", _join_node),
]
FAN_BRANCHES = [f"b{i}" for i in range(1, FAN_WIDTH + 1)]


# -- graph builders ------------------------------------------------------------------------------


def _ours_chain(checkpointer: bool) -> Invoke:
    graph = StateGraph(_chain_schema())
    previous = START
    for name, fn in CHAIN_NODES:
        graph.add_node(name, fn)
        graph.add_edge(previous, name)
        previous = name
    graph.add_edge(previous, END)
    saver = MemorySaver() if checkpointer else None
    app = graph.compile(CompileConfig(checkpoint_saver=saver, recursion_limit=RECURSION_LIMIT))
    return app.invoke


def _theirs_chain(checkpointer: bool) -> Invoke:
    graph = LGStateGraph(ChainState)
    previous = LG_START
    for name, fn in CHAIN_NODES:
        graph.add_node(name, fn)
        graph.add_edge(previous, name)
        previous = name
    graph.add_edge(previous, LG_END)
    app = graph.compile(checkpointer=InMemorySaver() if checkpointer else None)
    return app.invoke


def _ours_fanout(checkpointer: bool) -> Invoke:
    graph = StateGraph(_fan_schema())
    for name, fn in FAN_NODES:
        graph.add_node(name, fn)
    graph.add_edge(START, "a")
    for branch in FAN_BRANCHES:
        graph.add_edge("a", branch)
    graph.add_edge(FAN_BRANCHES, "c")
    graph.add_edge("c", END)
    saver = MemorySaver() if checkpointer else None
    app = graph.compile(CompileConfig(checkpoint_saver=saver, recursion_limit=RECURSION_LIMIT))
    return app.invoke


def _theirs_fanout(checkpointer: bool) -> Invoke:
    graph = LGStateGraph(FanState)
    for name, fn in FAN_NODES:
        graph.add_node(name, fn)
    graph.add_edge(LG_START, "a")
    for branch in FAN_BRANCHES:
        graph.add_edge("a", branch)
    graph.add_edge(FAN_BRANCHES, "c")
    graph.add_edge("c", LG_END)
    app = graph.compile(checkpointer=InMemorySaver() if checkpointer else None)
    return app.invoke


def _ours_config(thread_id: str | None) -> RunnableConfig:
    return RunnableConfig(thread_id=thread_id, recursion_limit=RECURSION_LIMIT)


def _theirs_config(thread_id: str | None) -> dict[str, Any]:
    config: dict[str, Any] = {"recursion_limit": RECURSION_LIMIT}
    if thread_id is not None:
        config["configurable"] = {"thread_id": thread_id}
    return config


def _ours_state(result: Any) -> dict[str, Any]:
    return dict(result)  # an AgentState, a Mapping


def _theirs_state(result: Any) -> dict[str, Any]:
    return dict(result)


@dataclass(frozen=True)
class Library:
    key: str
    label: str
    configure: Callable[[str | None], Any]
    state: Callable[[Any], dict[str, Any]]


OURS = Library("ours", "langgraph_celery", _ours_config, _ours_state)
THEIRS = Library("langgraph", "LangGraph", _theirs_config, _theirs_state)


@dataclass(frozen=True)
class Scenario:
    key: str
    title: str
    steps: int  # node executions per invoke
    checkpointer: bool
    builders: Mapping[str, Callable[[bool], Invoke]]  # Library.key -> builder
    input: Mapping[str, Any]
    expected: Mapping[str, Any]
    invokes: int  # per round, full run


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        key="chain",
        title=f"{CHAIN_LENGTH}-node chain, no checkpointer",
        steps=CHAIN_LENGTH,
        checkpointer=False,
        builders={"ours": _ours_chain, "langgraph": _theirs_chain},
        input={"count": 0, "last": -1},
        expected={"count": CHAIN_LENGTH, "last": CHAIN_LENGTH - 1},
        invokes=40,
    ),
    Scenario(
        key="chain_ckpt",
        title=f"{CHAIN_LENGTH}-node chain, in-memory checkpointer",
        steps=CHAIN_LENGTH,
        checkpointer=True,
        builders={"ours": _ours_chain, "langgraph": _theirs_chain},
        input={"count": 0, "last": -1},
        expected={"count": CHAIN_LENGTH, "last": CHAIN_LENGTH - 1},
        invokes=25,
    ),
    Scenario(
        key="fanout",
        title=f"{FAN_WIDTH}-wide fan-out + join, no checkpointer",
        steps=len(FAN_NODES),
        checkpointer=False,
        builders={"ours": _ours_fanout, "langgraph": _theirs_fanout},
        input={"total": 0, "joined": False},
        expected={"total": 1 + sum(range(1, FAN_WIDTH + 1)) + 1_000, "joined": True},
        invokes=300,
    ),
)
SCENARIO_KEYS = tuple(scenario.key for scenario in SCENARIOS)


# -- checking ------------------------------------------------------------------------------------


def _thread_ids(scenario: Scenario, library: Library, tag: str, count: int) -> list[str | None]:
    if not scenario.checkpointer:
        return [None] * count
    return [f"{library.key}-{scenario.key}-{tag}-{i}" for i in range(count)]


def check(scenario: Scenario) -> None:
    """Run the scenario once with each library; both final states must equal the expected."""
    states: dict[str, dict[str, Any]] = {}
    for library in (OURS, THEIRS):
        invoke = scenario.builders[library.key](scenario.checkpointer)
        (thread_id,) = _thread_ids(scenario, library, "check", 1)
        inp = dict(scenario.input)
        states[library.key] = library.state(invoke(inp, library.configure(thread_id)))
        assert inp == scenario.input, f"{library.label} mutated the input of {scenario.key}"
    assert states["ours"] == states["langgraph"], (
        f"{scenario.key}: final states differ: ours {states['ours']} vs "
        f"LangGraph {states['langgraph']}"
    )
    assert states["ours"] == dict(scenario.expected), (
        f"{scenario.key}: final state {states['ours']} is not the expected {scenario.expected}"
    )


# -- timing --------------------------------------------------------------------------------------


def _timed_batch(invoke: Invoke, inp: Mapping[str, Any], configs: Sequence[Any]) -> float:
    """Seconds per invoke over ``configs`` (one invoke each)."""
    gc.collect()
    start = time.perf_counter()
    for config in configs:
        invoke(inp, config)
    return (time.perf_counter() - start) / len(configs)


@dataclass
class Measurement:
    scenario: str
    title: str
    steps: int
    invokes_per_round: int
    rounds: int
    ours_s: list[float]  # per-invoke seconds, one per round
    langgraph_s: list[float]

    @property
    def ours_median(self) -> float:
        return statistics.median(self.ours_s)

    @property
    def langgraph_median(self) -> float:
        return statistics.median(self.langgraph_s)

    @property
    def ratio(self) -> float:
        return self.ours_median / self.langgraph_median


def measure(scenario: Scenario, rounds: int, invokes: int, warmup: int) -> Measurement:
    inp = dict(scenario.input)
    for library in (OURS, THEIRS):
        invoke = scenario.builders[library.key](scenario.checkpointer)
        for thread_id in _thread_ids(scenario, library, "warmup", warmup):
            invoke(inp, library.configure(thread_id))
    times: dict[str, list[float]] = {OURS.key: [], THEIRS.key: []}
    for round_no in range(rounds):
        order = (OURS, THEIRS) if round_no % 2 == 0 else (THEIRS, OURS)
        for library in order:
            invoke = scenario.builders[library.key](scenario.checkpointer)
            (warm_thread,) = _thread_ids(scenario, library, f"r{round_no}-warm", 1)
            invoke(inp, library.configure(warm_thread))
            configs = [
                library.configure(thread_id)
                for thread_id in _thread_ids(scenario, library, f"r{round_no}", invokes)
            ]
            times[library.key].append(_timed_batch(invoke, inp, configs))
    return Measurement(
        scenario=scenario.key,
        title=scenario.title,
        steps=scenario.steps,
        invokes_per_round=invokes,
        rounds=rounds,
        ours_s=times[OURS.key],
        langgraph_s=times[THEIRS.key],
    )


def geometric_mean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(value) for value in values) / len(values))


# -- reporting -----------------------------------------------------------------------------------


def _version(distribution: str) -> str:
    try:
        return dist_version(distribution)
    except PackageNotFoundError:
        return "not installed"


def versions() -> dict[str, str]:
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "langgraph": _version("langgraph"),
        "langgraph-checkpoint": _version("langgraph-checkpoint"),
        "langgraph_celery": _version("langgraph-celery"),
    }


def _spread(samples: Sequence[float]) -> float:
    """(max - min) / median over the rounds, in percent."""
    return 100.0 * (max(samples) - min(samples)) / statistics.median(samples)


def render(measurements: Sequence[Measurement], info: Mapping[str, str]) -> str:
    lines = [
        f"Python {info['python']} ({info['implementation']}), langgraph {info['langgraph']} "
        f"(checkpoint {info['langgraph-checkpoint']}), langgraph_celery "
        f"{info['langgraph_celery']}",
        f"{info['platform']}",
        "",
    ]
    header = (
        f"{'scenario':<44} {'ours ms/inv':>11} {'µs/step':>8} "
        f"{'LangGraph ms/inv':>16} {'µs/step':>8} {'ours/LG':>8}"
    )
    lines += [header, "-" * len(header)]
    for m in measurements:
        ours, theirs = m.ours_median, m.langgraph_median
        lines.append(
            f"{m.title:<44} {ours * 1e3:>11.3f} {ours * 1e6 / m.steps:>8.1f} "
            f"{theirs * 1e3:>16.3f} {theirs * 1e6 / m.steps:>8.1f} {m.ratio:>8.3f}"
        )
    lines.append("-" * len(header))
    ratios = [m.ratio for m in measurements]
    geomean = geometric_mean(ratios)
    verdict = "MET" if geomean <= TARGET_GEOMEAN else "NOT MET"
    lines.append(
        f"geometric mean of ours/LangGraph: {geomean:.3f}  (target <= {TARGET_GEOMEAN}: {verdict})"
    )
    lines.append("")
    lines.append(
        "median of per-round per-invoke times; step = one node execution; spread over rounds "
        "(max-min)/median: "
        + ", ".join(
            f"{m.scenario} ours {_spread(m.ours_s):.0f}% / LG {_spread(m.langgraph_s):.0f}%"
            for m in measurements
        )
    )
    lines.append(
        f"rounds: {measurements[0].rounds}; invokes per round: "
        + ", ".join(f"{m.scenario} {m.invokes_per_round}" for m in measurements)
    )
    return "\n".join(lines)


def to_json(measurements: Sequence[Measurement], info: Mapping[str, str]) -> dict[str, Any]:
    ratios = [m.ratio for m in measurements]
    geomean = geometric_mean(ratios)
    return {
        "versions": dict(info),
        "target_geomean": TARGET_GEOMEAN,
        "geomean_ratio": geomean,
        "target_met": geomean <= TARGET_GEOMEAN,
        "scenarios": [
            {
                **asdict(m),
                "ours_ms_per_invoke": m.ours_median * 1e3,
                "ours_us_per_step": m.ours_median * 1e6 / m.steps,
                "langgraph_ms_per_invoke": m.langgraph_median * 1e3,
                "langgraph_us_per_step": m.langgraph_median * 1e6 / m.steps,
                "ratio": m.ratio,
            }
            for m in measurements
        ],
    }


# -- profiling -----------------------------------------------------------------------------------


def profile(scenario: Scenario, library: Library, invokes: int, top: int) -> str:
    """cProfile ``invokes`` invokes (after a warm-up); the top functions by own time, per step."""
    invoke = scenario.builders[library.key](scenario.checkpointer)
    inp = dict(scenario.input)
    for thread_id in _thread_ids(scenario, library, "profile-warm", 3):
        invoke(inp, library.configure(thread_id))
    configs = [
        library.configure(thread_id)
        for thread_id in _thread_ids(scenario, library, "profile", invokes)
    ]
    profiler = cProfile.Profile()
    profiler.enable()
    for config in configs:
        invoke(inp, config)
    profiler.disable()
    stats = pstats.Stats(profiler)
    steps = invokes * scenario.steps
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total: float = stats.total_tt  # type: ignore[attr-defined]
    rows = sorted(raw.items(), key=lambda item: item[1][2], reverse=True)[:top]
    header = (
        f"{'calls/step':>10} {'tottime µs/step':>15} {'cumtime µs/step':>15} {'% tot':>6}  function"
    )
    lines = [
        f"cProfile of {library.label} on {scenario.title}: {invokes} invokes, {steps} steps, "
        f"{total * 1e6 / steps:.1f} µs/step under the profiler (profiling inflates this)",
        f"top {top} by tottime:",
        header,
        "-" * len(header),
    ]
    for (filename, line, name), (_cc, ncalls, tottime, cumtime, _callers) in rows:
        where = _short_path(filename)
        location = f"{where}:{line}({name})" if line else name
        lines.append(
            f"{ncalls / steps:>10.2f} {tottime * 1e6 / steps:>15.2f} "
            f"{cumtime * 1e6 / steps:>15.2f} {100 * tottime / total:>6.1f}  {location}"
        )
    return "\n".join(lines)


def _short_path(filename: str) -> str:
    for marker in ("site-packages/", "src/", "lib/python"):
        index = filename.find(marker)
        if index >= 0:
            return filename[index + len(marker) :]
    return filename


# -- entry point ---------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.inprocess",
        description="Time langgraph_celery against LangGraph in process on identical graphs.",
    )
    parser.add_argument("--quick", action="store_true", help="a fast smoke run (few invokes)")
    parser.add_argument("--json", metavar="PATH", type=Path, help="write the figures as JSON")
    parser.add_argument("--rounds", type=int, help="rounds per scenario (default 7, quick 2)")
    parser.add_argument(
        "--scenario",
        action="append",
        choices=SCENARIO_KEYS,
        help="run only these scenarios (repeatable; default all)",
    )
    parser.add_argument(
        "--profile",
        choices=SCENARIO_KEYS,
        help="instead of timing, cProfile one library on this scenario",
    )
    parser.add_argument(
        "--profile-library",
        choices=(OURS.key, THEIRS.key),
        default=OURS.key,
        help="the library --profile profiles (default: ours)",
    )
    parser.add_argument("--top", type=int, default=20, help="rows of the --profile table")
    args = parser.parse_args(argv)

    selected = [s for s in SCENARIOS if not args.scenario or s.key in args.scenario]
    info = versions()

    if args.profile is not None:
        scenario = next(s for s in SCENARIOS if s.key == args.profile)
        library = OURS if args.profile_library == OURS.key else THEIRS
        invokes = 3 if args.quick else scenario.invokes * 2
        check(scenario)
        print(
            f"Python {info['python']}, langgraph {info['langgraph']}, "
            f"langgraph_celery {info['langgraph_celery']}"
        )
        print(profile(scenario, library, invokes, args.top))
        return 0

    rounds = args.rounds if args.rounds is not None else (2 if args.quick else 7)
    if rounds < 1:
        parser.error("--rounds must be at least 1")
    for scenario in selected:
        check(scenario)
    print("final states checked: identical in both libraries and as expected", flush=True)

    measurements = []
    for scenario in selected:
        invokes = max(2, scenario.invokes // 20) if args.quick else scenario.invokes
        warmup = 1 if args.quick else max(3, invokes // 5)
        print(f"timing {scenario.key}: {rounds} rounds x {invokes} invokes...", flush=True)
        measurements.append(measure(scenario, rounds, invokes, warmup))
    print()
    print(render(measurements, info))

    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(to_json(measurements, info), indent=2) + "\n")
        print(f"\nfigures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
