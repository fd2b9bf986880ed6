"""The readers' JSON parsing: orjson when installed, json otherwise -- the same episodes and the
same error messages either way (rlvp_dsl.readers.json_text.loads)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlvp_dsl.readers import ReaderError, read_episodes, read_paths
from rlvp_dsl.readers import json_text, parse_arguments

REPO = Path(__file__).resolve().parents[2]
SAMPLES = [REPO / "examples" / "data", REPO / "examples" / "episodes"]
DATA = REPO.parent / "shared" / "data"

try:
    import orjson  # noqa: F401

    HAVE_ORJSON = True
except ImportError:
    HAVE_ORJSON = False

needs_orjson = pytest.mark.skipif(not HAVE_ORJSON, reason="orjson not installed (pip install 'rlvp[fast]')")


@pytest.fixture(params=["orjson", "json"])
def backend(request, monkeypatch):
    """Each test runs with orjson (skipped when it is not installed) and with plain json."""
    if request.param == "orjson":
        if not HAVE_ORJSON:
            pytest.skip("orjson not installed")
    else:
        monkeypatch.setattr(json_text, "orjson", None)
    return request.param


def _with(monkeypatch, name, fn):
    """`fn()` with the readers' JSON backend set to `name`."""
    if name == "json":
        monkeypatch.setattr(json_text, "orjson", None)
    else:
        monkeypatch.undo()
    return fn()


def _as_json(episodes):
    return [(e.to_json(), dict(e.meta)) for e in episodes]


@needs_orjson
def test_the_samples_read_the_same_with_both(monkeypatch):
    fast = _with(monkeypatch, "orjson", lambda: _as_json(read_paths(SAMPLES)))
    plain = _with(monkeypatch, "json", lambda: _as_json(read_paths(SAMPLES)))
    assert len(fast) > 10
    assert fast == plain


@needs_orjson
@pytest.mark.skipif(not DATA.is_dir(), reason="shared data not present (../shared/data)")
def test_the_shared_corpus_reads_the_same_with_both(monkeypatch):
    folders = [DATA / "tau2_simulations", DATA / "tau_bench_v1", DATA / "swe_agent"]
    fast = _with(monkeypatch, "orjson", lambda: _as_json(read_paths(folders)))
    plain = _with(monkeypatch, "json", lambda: _as_json(read_paths(folders)))
    assert len(fast) >= 316
    assert fast == plain


@pytest.mark.parametrize(
    "text",
    [
        '{"x": NaN, "y": Infinity}',  # json accepts these literals; orjson does not
        '{"s": "\\ud800 lone surrogate"}',
        '[1, 2.5, "é", null, true]',
    ],
)
def test_loads_gives_json_values(backend, text):
    got, want = json_text.loads(text), json.loads(text)
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)


def test_an_integer_beyond_64_bits_is_the_one_difference(backend):
    """orjson reads an integer that does not fit 64 bits as a float (as JavaScript does); json
    keeps it exact.  Documented in docs/readers.md."""
    text = '{"big": 123456789012345678901234567890, "fits": 18446744073709551615}'
    value = json_text.loads(text)
    assert value["fits"] == 18446744073709551615 and isinstance(value["fits"], int)
    if backend == "json":
        assert value["big"] == 123456789012345678901234567890
    else:
        assert value["big"] == float(123456789012345678901234567890)


BROKEN = {
    "cut.json": '{"simulations": [{"messages": [{"role": "user", "content": "hi',
    "comma.json": '{"simulations": [\n  {"messages": []},\n]}',
    "word.json": '{"messages": [{"role": "user", "content": nope}]}',
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_invalid_json_messages_are_jsons_own(backend, tmp_path, name):
    path = tmp_path / name
    path.write_text(BROKEN[name], encoding="utf-8")
    with pytest.raises(ReaderError) as caught:
        read_episodes(path)
    try:
        json.loads(BROKEN[name])
    except json.JSONDecodeError as exc:
        expected = f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {json_text.json_problem(exc, BROKEN[name])}"
    assert str(caught.value) == expected


def test_bad_arguments_text_names_the_same_problem(backend):
    arguments, raw, problem = parse_arguments('{"reservation_id": "AB')
    assert (arguments, raw) == ({}, '{"reservation_id": "AB')
    with pytest.raises(json.JSONDecodeError) as exc:
        json.loads('{"reservation_id": "AB')
    assert problem == f"arguments are not valid JSON ({exc.value.msg} at char {exc.value.pos})"
    assert parse_arguments('{"a": 1}') == ({"a": 1}, '{"a": 1}', "")
    assert parse_arguments("[1]")[2] == "arguments must be a JSON object, got JSON list"


def test_jsonl_bad_line_is_named(backend, tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "a"}]}\n{"messages": [\n', encoding="utf-8")
    with pytest.raises(ReaderError, match=r"chat\.jsonl:2:\d+: invalid JSON"):
        read_episodes(path)


def test_a_value_cut_off_at_the_end_is_named_a_truncated_file():
    """The tau2 sample cut in half ends in `"refusal": nul`: a few characters after the error
    position, still the end of a cut file."""
    for text in ('{"a": [1, {"refusal": nul', '{"a": tru', '{"a": '):
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            assert json_text.json_problem(exc, text).endswith("is the file truncated?"), text
    for text in ('{"a": 1} {"b": 2}', '{"a":1} trailing', "garbage", '{"a": nulx}'):  # not a cut file
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            assert "truncated" not in json_text.json_problem(exc, text), text
