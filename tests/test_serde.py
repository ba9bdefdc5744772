from __future__ import annotations

import dataclasses
import enum
import json
import math
import sys
import uuid
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, computed_field

import langgraph_celery.serde as serde_mod
from langgraph_celery.errors import SerializationError
from langgraph_celery.serde import JsonSerializer, Serializer


class Color(enum.Enum):
    RED = "red"
    BLUE = (1, 2)


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int
    tags: tuple[str, ...] = ()


@dataclasses.dataclass
class Box:
    corner: Point
    color: Color
    created: datetime
    counter: int = dataclasses.field(default=0, init=False)


class Address(BaseModel):
    city: str
    zip_code: str = Field(alias="zipCode")


class User(BaseModel):
    name: str
    joined: datetime
    ids: tuple[int, ...]
    address: Address
    level: Level
    blob: bytes

    @computed_field  # type: ignore[prop-decorator]
    @property
    def upper(self) -> str:
        return self.name.upper()


class Unknown:
    pass


@dataclasses.dataclass
class NotRegistered:
    a: int


class NotRegisteredModel(BaseModel):
    a: int


class Mood(enum.Enum):
    HAPPY = 1


def full() -> JsonSerializer:
    return JsonSerializer(types=[Color, Level, Point, Box, User])


def roundtrip(value: Any, s: JsonSerializer | None = None) -> Any:
    s = s or full()
    text = s.dumps(value)
    assert isinstance(text, str)
    json.loads(text)  # always valid strict JSON
    back = s.loads(text)
    via_message = s.from_jsonable(json.loads(json.dumps(s.to_jsonable(value))))
    assert s.dumps(via_message) == s.dumps(back)  # same text: NaN-safe comparison
    return back


# -- round trips -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -(10**30),
        1.5,
        -0.0,
        "",
        "héllo \u2603",
        [],
        {},
        [1, "a", None, 2.5, [True]],
        {"a": {"b": [1, {"c": None}]}},
        (),
        (1, "a", (2, 3)),
        {1, 2, 3},
        set(),
        frozenset({"a", (1, 2)}),
        b"\x00\xffbytes",
        bytearray(b"abc"),
        datetime(2024, 5, 6, 7, 8, 9, 123456),
        datetime(2024, 5, 6, 7, 8, 9, 1, tzinfo=UTC),
        datetime(2024, 5, 6, 7, 8, tzinfo=timezone(timedelta(hours=-3, minutes=-30))),
        date(1999, 12, 31),
        time(23, 59, 59, 999999),
        time(1, 2, tzinfo=timezone(timedelta(hours=2))),
        timedelta(days=-3, seconds=5, microseconds=7),
        uuid.UUID("12345678-1234-5678-1234-567812345678"),
        Decimal("1.10"),
        Decimal("-1E+7"),
        Decimal("NaN"),
        {1: "int key", (1, 2): "tuple key", None: 0, 2.5: "f"},
        {"__lgc__": "tuple", "v": [1, 2]},
        {"x": {"__lgc__": 1}},
    ],
)
def test_round_trip_same_type_and_value(value: Any) -> None:
    back = roundtrip(value)
    if isinstance(value, Decimal) and value.is_nan():
        assert isinstance(back, Decimal) and back.is_nan()
        return
    assert type(back) is type(value)
    assert back == value
    if isinstance(value, datetime | time):
        assert back.tzinfo == value.tzinfo
        assert back.utcoffset() == value.utcoffset()


def test_bool_stays_bool_and_int_stays_int() -> None:
    back = roundtrip({"t": True, "one": 1, "z": 0, "f": False, "l": [True, 1]})
    assert [type(back[k]) for k in ("t", "one", "z", "f")] == [bool, int, int, bool]
    assert [type(x) for x in back["l"]] == [bool, int]


def test_decimal_keeps_exponent() -> None:
    assert str(roundtrip(Decimal("1.000"))) == "1.000"


@pytest.mark.parametrize("value", [math.inf, -math.inf])
def test_infinite_floats_are_encoded_explicitly(value: float) -> None:
    s = JsonSerializer()
    text = s.dumps({"x": value})
    assert "Infinity" not in text
    assert s.loads(text) == {"x": value}


def test_nan_is_encoded_explicitly() -> None:
    s = JsonSerializer()
    text = s.dumps([math.nan])
    assert "NaN" not in text
    (back,) = s.loads(text)
    assert type(back) is float and math.isnan(back)


def test_zoneinfo_datetime_keeps_zone_and_fold() -> None:
    paris = ZoneInfo("Europe/Paris")
    ambiguous = datetime(2024, 10, 27, 2, 30, fold=1, tzinfo=paris)
    imaginary = datetime(2024, 3, 31, 2, 30, tzinfo=paris)
    back = roundtrip([ambiguous, imaginary])
    assert back[0].tzinfo is paris and back[0].fold == 1
    assert back[0].utcoffset() == timedelta(hours=1)
    assert back[1].tzinfo is paris and back[1].replace(tzinfo=None) == datetime(2024, 3, 31, 2, 30)


def test_nested_combinations() -> None:
    value = [
        {"pairs": {(1, "a"), (2, "b")}, "nested": [(1, {2: (3, b"x")})]},
        {5: {"__lgc__": {"inner": (None,)}}},
        frozenset({frozenset({1}), (date(2020, 1, 1),)}),
    ]
    back = roundtrip(value)
    assert back == value
    assert type(back[0]["nested"][0]) is tuple
    assert type(back[0]["nested"][0][1][2][1]) is bytes
    assert back[1][5]["__lgc__"]["inner"] == (None,)


def test_dict_with_tag_key_round_trips_exactly() -> None:
    s = JsonSerializer()
    value = {"__lgc__": "dataclass", "t": "os.system", "v": {"a": 1}}
    assert s.loads(s.dumps(value)) == value
    assert s.from_jsonable(s.to_jsonable(value)) == value


def test_dict_order_is_kept() -> None:
    value = {"b": 1, 2: 2, "a": 3}
    assert list(roundtrip(value)) == ["b", 2, "a"]


def test_plain_json_is_stored_as_is() -> None:
    s = JsonSerializer()
    value = {"a": [1, 2.5, "x", None, True], "b": {"c": {}}}
    assert s.dumps(value) == json.dumps(value, separators=(",", ":"))
    assert s.to_jsonable(value) == value


def test_tagged_format_is_documented_shape() -> None:
    s = JsonSerializer()
    assert s.to_jsonable((1, 2)) == {"__lgc__": "tuple", "v": [1, 2]}
    assert s.to_jsonable({1: "a"}) == {"__lgc__": "dict", "v": [[1, "a"]]}
    assert s.to_jsonable(b"hi") == {"__lgc__": "bytes", "v": "aGk="}


# -- registered types ------------------------------------------------------------------------


def test_enums_by_value() -> None:
    s = full()
    assert s.to_jsonable(Color.RED) == {
        "__lgc__": "enum",
        "t": f"{__name__}.Color",
        "v": "red",
    }
    back = roundtrip([Color.RED, Color.BLUE, Level.HIGH, {Level.LOW: Color.BLUE}])
    assert back == [Color.RED, Color.BLUE, Level.HIGH, {Level.LOW: Color.BLUE}]
    assert back[0] is Color.RED and back[2] is Level.HIGH


def test_dataclasses_recursive() -> None:
    box = Box(Point(1, 2, ("a",)), Color.BLUE, datetime(2020, 1, 2, tzinfo=UTC))
    box.counter = 7
    back = roundtrip({"box": box, "points": {Point(0, 0)}})
    assert back["box"] == box
    assert back["box"].counter == 7
    assert type(back["box"].corner) is Point and back["box"].corner.tags == ("a",)
    assert back["points"] == {Point(0, 0)}


def test_pydantic_models() -> None:
    user = User(
        name="ann",
        joined=datetime(2021, 1, 1, 12, tzinfo=UTC),
        ids=(1, 2),
        address=Address(city="Oslo", zipCode="0150"),
        level=Level.HIGH,
        blob=b"\x01",
    )
    back = roundtrip({"users": [user]})
    assert back == {"users": [user]}
    assert back["users"][0].address.zip_code == "0150"
    assert back["users"][0].level is Level.HIGH


def test_register_decorator_and_types_property() -> None:
    s = JsonSerializer()

    @s.register
    @dataclasses.dataclass
    class Local:
        a: Any

    assert Local.__name__ == "Local"  # returned unchanged
    assert s.types == (Local,)
    assert s.loads(s.dumps({"k": Local((1, 2))})) == {"k": Local((1, 2))}
    assert full().types == (Color, Level, Point, Box, User)


@pytest.mark.parametrize("bad", [Unknown, int, object(), "x", Mood.HAPPY])
def test_register_refuses_other_things(bad: Any) -> None:
    with pytest.raises(TypeError, match="cannot register"):
        JsonSerializer().register(bad)
    with pytest.raises(TypeError, match="cannot register"):
        JsonSerializer(types=[bad])


def test_register_refuses_a_second_class_under_the_same_name() -> None:
    s = JsonSerializer()

    def make() -> type:
        @dataclasses.dataclass
        class Same:
            a: int

        return Same

    s.register(make())
    with pytest.raises(ValueError, match="already registered"):
        s.register(make())


def test_registration_is_per_instance() -> None:
    text = full().dumps(Point(1, 2))
    with pytest.raises(SerializationError, match=r"Point' is not registered"):
        JsonSerializer().loads(text)
    with pytest.raises(SerializationError, match="Point"):
        JsonSerializer().dumps(Point(1, 2))


# -- refusals on encode ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "path", "type_name", "hint"),
    [
        (
            {"profile": {"friends": [1, 2, Unknown()]}},
            "profile.friends[2]",
            f"{__name__}.Unknown",
            "convert it to JSON types",
        ),
        (
            {"messages": [0, 1, 2, {"meta": {"x": NotRegistered(1)}}]},
            "messages[3].meta.x",
            f"{__name__}.NotRegistered",
            "register it with JsonSerializer(types=[NotRegistered])",
        ),
        (
            {"m": (1, {"odd key": NotRegisteredModel(a=1)})},
            "m[1]['odd key']",
            f"{__name__}.NotRegisteredModel",
            "serializer.register(NotRegisteredModel)",
        ),
        ({"e": {3: {Mood.HAPPY}}}, "e[3]{...}", f"{__name__}.Mood", "register it"),
        ({"f": [1, Unknown]}, "f[1]", "type", "convert it"),
        ({"d": Box(Point(1, 2), Color.RED, object())}, "d.created", "object", "convert"),  # type: ignore[arg-type]
    ],
)
def test_unsupported_value_names_key_path_and_type(
    state: dict[str, Any], path: str, type_name: str, hint: str
) -> None:
    s = full()
    with pytest.raises(SerializationError) as info:
        s.dumps(state)
    message = str(info.value)
    key = next(iter(state))
    assert message.startswith(f"cannot serialize state key {key!r} (at {path}): ")
    assert f"type {type_name} is not in the JSON allowlist" in message
    assert hint in message
    with pytest.raises(SerializationError, match=path.replace("[", r"\[").replace(".", r"\.")):
        s.to_jsonable(state)


def test_non_mapping_root_error() -> None:
    with pytest.raises(SerializationError, match=r"cannot serialize value \(at \[1\]\)"):
        JsonSerializer().dumps([1, Unknown()])
    with pytest.raises(SerializationError, match=r"value \(at <root>\).*Unknown"):
        JsonSerializer().dumps(Unknown())


@pytest.mark.parametrize(
    ("value", "base"),
    [
        (type("MyFloat", (float,), {})(1.5), "float"),
        (type("MyInt", (int,), {})(3), "int"),
        (type("MyStr", (str,), {})("s"), "str"),
        (type("MyDict", (dict,), {})(), "dict"),
    ],
)
def test_subclasses_of_builtin_types_are_refused(value: Any, base: str) -> None:
    with pytest.raises(SerializationError, match=f"convert it to a plain {base}"):
        JsonSerializer().dumps({"k": value})


def test_reference_cycle_is_a_serialization_error() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(SerializationError, match="reference cycle"):
        JsonSerializer().dumps(cyclic)


_HUGE = 10**5000  # past Python's int-to-str limit (4300 digits): no JSON text holds it


@pytest.mark.parametrize(
    ("state", "path"),
    [
        ({"x": _HUGE}, "x"),
        ({"ok": 1, "x": {"y": [1, (2, _HUGE)]}}, "x.y[1][1]"),
        ({"x": {3: {"z": _HUGE}}}, "x[3].z"),
        ({"x": {_HUGE: 1}}, "x"),  # a key: the path stays at its dict
        ({"x": {(1, _HUGE): 1}}, "x"),
        ({"x": {_HUGE}}, "x{...}"),
        ({"x": Point(1, _HUGE)}, "x.y"),
        ({"x": Level.LOW, "y": [Color.RED, _HUGE]}, "y[1]"),
    ],
)
def test_an_int_past_the_int_to_str_limit_names_key_path(state: dict[str, Any], path: str) -> None:
    """The JSON text encoder refuses such an int with a ValueError: it is a SerializationError
    naming the key, as a type outside the allowlist is (so that a run storing it fails)."""
    with pytest.raises(SerializationError) as info:
        full().dumps(state)
    message = str(info.value)
    key = path.split(".")[0].split("[")[0].split("{")[0]
    assert message.startswith(f"cannot serialize state key {key!r} (at {path}): ")
    assert f"an int of more than {sys.get_int_max_str_digits()} digits" in message
    assert "store it as text, e.g. hex(n)" in message
    assert int(full().loads(full().dumps({"x": hex(_HUGE)}))["x"], 16) == _HUGE


def test_an_int_past_the_limit_outside_a_mapping() -> None:
    with pytest.raises(SerializationError, match=r"cannot serialize value \(at \[1\]\): an int"):
        JsonSerializer().dumps([1, _HUGE])
    with pytest.raises(SerializationError, match=r"cannot serialize value \(at <root>\): an int"):
        JsonSerializer().dumps(_HUGE)


def test_nesting_the_json_text_encoder_refuses_names_the_state_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Nesting deeper than the C encoder's recursion limit (which Python 3.12 keeps apart from
    sys.getrecursionlimit(), so the walk over the value can pass it) is a SerializationError."""
    deep: list[Any] = []
    for _ in range(sys.getrecursionlimit() * 50):
        deep = [deep]
    s = JsonSerializer()
    monkeypatch.setattr(s, "to_jsonable", lambda obj: {"ok": 1, "deep": deep})
    with pytest.raises(SerializationError) as info:
        s.dumps({})
    assert str(info.value) == (
        "cannot serialize state key 'deep' (at deep): it is nested too deeply to be written as JSON"
    )


# -- refusals on decode ----------------------------------------------------------------------


def test_unregistered_type_tag_is_refused_without_import() -> None:
    name = "some_module_that_must_not_be_imported_xyz"
    text = json.dumps({"a": [{"__lgc__": "dataclass", "t": f"{name}.Thing", "v": {}}]})
    with pytest.raises(SerializationError) as info:
        JsonSerializer().loads(text)
    assert "at a[0]" in str(info.value)
    assert f"{name}.Thing' is not registered" in str(info.value)
    assert name not in sys.modules
    text = json.dumps({"__lgc__": "enum", "t": "os.system", "v": "echo hi"})
    with pytest.raises(SerializationError, match=r"'os\.system' is not registered"):
        JsonSerializer().loads(text)


def test_tag_kind_must_match_registered_class() -> None:
    s = full()
    text = json.dumps({"__lgc__": "model", "t": f"{__name__}.Point", "v": {"x": 1, "y": 2}})
    with pytest.raises(SerializationError, match="not registered"):
        s.loads(text)


@pytest.mark.parametrize(
    "text",
    ["", "{", "[1,]", "{'a': 1}", "NaN", "[Infinity]", '{"a": -Infinity}', "\x00"],
)
def test_malformed_json(text: str) -> None:
    with pytest.raises(SerializationError, match="not valid JSON"):
        JsonSerializer().loads(text)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ({"__lgc__": "tuple", "v": 3}, "bad 'tuple' payload"),
        ({"__lgc__": "bytes", "v": "not base64!"}, "bad 'bytes' payload"),
        ({"__lgc__": "datetime", "v": "yesterday"}, "bad 'datetime' payload"),
        ({"__lgc__": "datetime", "v": "2020-01-01T00:00", "tz": "../../etc/passwd"}, "bad"),
        ({"__lgc__": "uuid", "v": 12}, "bad 'uuid' payload"),
        ({"__lgc__": "decimal", "v": "one"}, "bad 'decimal' payload"),
        ({"__lgc__": "float", "v": "1.5"}, "bad 'float' payload"),
        ({"__lgc__": "timedelta", "v": [1, 2]}, "bad 'timedelta' payload"),
        ({"__lgc__": "set", "v": [[1]]}, "bad 'set' payload"),
        ({"__lgc__": "dict", "v": [[1, 2, 3]]}, "bad 'dict' payload"),
        ({"__lgc__": "dict", "v": [{"a": 1, "b": 2}]}, "bad 'dict' payload"),
        ({"__lgc__": "nope", "v": 1}, "unknown tag 'nope'"),
        ({"__lgc__": 7}, "unknown tag 7"),
        ({"__lgc__": "enum", "v": 1}, "tag .enum. without a type name"),
        (
            {"__lgc__": "const", "t": "no.such.Constant"},
            "const .no.such.Constant. is not registered",
        ),
    ],
)
def test_bad_tag_payload(payload: dict[str, Any], reason: str) -> None:
    s = JsonSerializer()
    with pytest.raises(SerializationError, match=r"cannot deserialize \(at x\[1\]\): " + reason):
        s.loads(json.dumps({"x": [0, payload]}))
    with pytest.raises(SerializationError, match=reason):
        s.from_jsonable(payload)


def test_registered_class_that_rejects_payload() -> None:
    s = full()
    bad_fields = {"__lgc__": "dataclass", "t": f"{__name__}.Point", "v": {"x": 1, "z": 2}}
    with pytest.raises(SerializationError, match=r"cannot rebuild .*Point.*unknown fields"):
        s.from_jsonable(bad_fields)
    bad_enum = {"__lgc__": "enum", "t": f"{__name__}.Color", "v": "green"}
    with pytest.raises(SerializationError, match=r"cannot rebuild .*Color"):
        s.from_jsonable(bad_enum)
    bad_model = {"__lgc__": "model", "t": f"{__name__}.User", "v": {"name": 1}}
    with pytest.raises(SerializationError, match=r"cannot rebuild .*User"):
        s.from_jsonable(bad_model)


# -- library built-ins -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Marker:
    value: Any


class _Sentinel:
    pass


def test_builtin_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    for table in ("_BUILTIN_TYPES", "_BUILTIN_NAMES", "_BUILTIN_CONSTANTS"):
        monkeypatch.setattr(serde_mod, table, dict(getattr(serde_mod, table)))
    monkeypatch.setattr(
        serde_mod, "_BUILTIN_CONSTANT_NAMES", dict(serde_mod._BUILTIN_CONSTANT_NAMES)
    )
    sentinel = _Sentinel()
    serde_mod._register_builtin(_Marker, "lgc.Marker")
    serde_mod._register_builtin_constant(sentinel, "lgc.SENTINEL")
    s = JsonSerializer()
    value = {"a": _Marker((1, sentinel)), "b": [sentinel]}
    assert s.to_jsonable(value)["b"] == [{"__lgc__": "const", "t": "lgc.SENTINEL"}]
    back = s.loads(s.dumps(value))
    assert back == value
    assert back["b"][0] is sentinel and back["a"].value[1] is sentinel
    assert s.types == ()
    with pytest.raises(TypeError, match="cannot register"):
        serde_mod._register_builtin(_Sentinel, "lgc.Bad")
    with pytest.raises(SerializationError, match="_Sentinel"):
        s.dumps(_Sentinel())  # only the registered instance, not its class


# -- misc ------------------------------------------------------------------------------------


def test_protocol() -> None:
    assert isinstance(JsonSerializer(), Serializer)
    assert not isinstance(object(), Serializer)


def test_no_pickle_in_source() -> None:
    package = Path(serde_mod.__file__).parent
    modules = sorted(package.rglob("*.py"))
    assert len(modules) > 100  # (every module of the package, not only the serializer's)
    for module in modules:
        source = module.read_text()
        assert "import pickle" not in source, module
        assert "pickle." not in source, module
        assert "__import__" not in source, module


def test_from_jsonable_passes_plain_data_through() -> None:
    data = {"a": [1, {"b": "c"}]}
    assert JsonSerializer().from_jsonable(data) == {"a": [1, {"b": "c"}]}
    assert JsonSerializer().from_jsonable(3) == 3


def test_to_jsonable_does_not_mutate_input() -> None:
    value = {"a": [(1, 2), {"b": {3}}], "c": [1]}
    JsonSerializer().to_jsonable(value)
    assert value == {"a": [(1, 2), {"b": {3}}], "c": [1]}
    data = {"x": [{"__lgc__": "tuple", "v": [1]}]}
    JsonSerializer().from_jsonable(data)
    assert data == {"x": [{"__lgc__": "tuple", "v": [1]}]}


# -- property test ---------------------------------------------------------------------------

_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary()
    | st.datetimes(timezones=st.none() | st.timezones())
    | st.dates()
    | st.times()
    | st.timedeltas()
    | st.uuids()
    | st.decimals(allow_nan=False)
)
_hashable = st.recursive(
    _scalars.filter(lambda x: not isinstance(x, Decimal) or not x.is_snan()),
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=5,
)
_values = st.recursive(
    _scalars | _hashable,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.sets(_hashable, max_size=3)
        | st.dictionaries(st.text(), inner, max_size=4)
        | st.dictionaries(_hashable, inner, max_size=3)
        | st.dictionaries(st.sampled_from(["__lgc__", "v", "t"]), inner, max_size=3)
    ),
    max_leaves=20,
)


def _same(a: Any, b: Any) -> bool:
    """Equality that also checks exact types (1 == 1.0 == True would otherwise hide bugs)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, datetime | time):
        return bool(a == b and a.tzinfo == b.tzinfo and a.fold == b.fold)
    equal: bool = a == b
    return equal


@settings(max_examples=300, deadline=None)
@given(_values)
def test_property_round_trip(value: Any) -> None:
    s = JsonSerializer()
    back = s.loads(s.dumps(value))
    assert _same(back, value)
    assert _same(s.from_jsonable(json.loads(json.dumps(s.to_jsonable(value)))), value)
