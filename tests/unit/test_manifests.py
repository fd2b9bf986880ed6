"""Tests for rlvp_dsl.manifests: the four formats, clear errors, and target inference."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import data_path

from rlvp_dsl.manifests import ManifestError, is_identifier_param, load_manifest, parse_manifest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "manifests"


def tau2_manifest(domain: str):
    """The tau2 manifest of `domain`: airline is shipped in examples/data; retail and telecom come
    from ../shared/data (skipped without it)."""
    path = data_path(f"tau2/{domain}/tools_manifest.json")
    if not path.exists():
        pytest.skip(f"shared data missing: {path}")
    return load_manifest(str(path))


def targets(manifest) -> dict[str, str | None]:
    return {t.name: t.target for t in manifest.tools}


# ---- the real tau2 manifests -------------------------------------------------------

AIRLINE_TARGETS = {
    "book_reservation": "user_id",
    "calculate": None,
    "cancel_reservation": "reservation_id",
    "get_reservation_details": "reservation_id",
    "get_user_details": "user_id",
    "list_all_airports": None,
    "search_direct_flight": None,
    "search_onestop_flight": None,
    "send_certificate": "user_id",
    "transfer_to_human_agents": None,
    "update_reservation_baggages": "reservation_id",
    "update_reservation_flights": "reservation_id",
    "update_reservation_passengers": "reservation_id",
    "get_flight_status": None,
}


def test_tau2_airline_targets_inferred_exactly():
    """Every airline tool gets exactly the expected inferred target (or none)."""
    m = tau2_manifest("airline")
    assert m.format == "tau2"
    assert targets(m) == AIRLINE_TARGETS
    assert all(t.target_inferred == (t.target is not None) for t in m.tools)


def test_tau2_airline_notes_name_the_partner():
    """Each inference is recorded as a note naming the tool it shares the identifier with."""
    m = tau2_manifest("airline")
    assert "target of cancel_reservation inferred as reservation_id (shared with get_reservation_details)" in m.notes
    assert "target of book_reservation inferred as user_id (shared with get_user_details)" in m.notes
    assert len(m.notes) == sum(t is not None for t in AIRLINE_TARGETS.values())


def test_tau2_airline_tags():
    """tau2 READ/WRITE/GENERIC become read/write/generic tags."""
    m = tau2_manifest("airline")
    assert m.tool("cancel_reservation").tags == {"write"}
    assert m.tool("get_user_details").tags == {"read"}
    assert m.tool("calculate").tags == {"generic"}
    assert m.tool("book_reservation").params[:3] == ("user_id", "origin", "destination")


def test_tau2_retail_targets():
    """Retail: order writes target order_id, the user address write user_id; unshared reads get none."""
    t = targets(tau2_manifest("retail"))
    assert t["cancel_pending_order"] == "order_id"
    assert t["exchange_delivered_order_items"] == "order_id"
    assert t["modify_user_address"] == "user_id"
    assert t["get_order_details"] == "order_id"
    assert t["get_user_details"] == "user_id"
    assert t["get_item_details"] is None  # item_id is taken by no write (they take item_ids)
    assert t["find_user_id_by_email"] is None


def test_tau2_telecom_user_side():
    """Telecom's user tools are tagged user_side and inferred separately (they get no target)."""
    m = tau2_manifest("telecom")
    user = [t for t in m.tools if "user_side" in t.tags]
    assert len(user) == 30 and all(t.target is None for t in user)
    assert m.tool("toggle_data").tags == {"write", "user_side"}
    t = targets(m)
    assert t["suspend_line"] == "customer_id"
    assert t["get_customer_by_id"] == "customer_id"
    assert t["get_details_by_id"] is None  # `id` is shared with no write tool


# ---- our example manifests, one per format ---------------------------------------------


def test_example_ours():
    """Our own format: declared targets kept, not marked inferred, no notes."""
    m = load_manifest(str(EXAMPLES / "airline_tools.json"))
    assert m.format == "rlvp-tools/1" and m.notes == ()
    assert m.tool("cancel_reservation").tags == {"write", "destructive"}
    assert m.tool("cancel_reservation").target == "reservation_id"
    assert not m.tool("cancel_reservation").target_inferred
    assert m.tool("search_onestop_flight").params == ("origin", "destination", "date")


def test_example_mcp():
    """MCP tools/list in a JSON-RPC envelope: hints become tags with the spec's defaults."""
    m = load_manifest(str(EXAMPLES / "mcp_tools_list.json"))
    assert m.format == "mcp"
    assert m.tool("read_file").tags == {"read", "closed_world"}
    assert m.tool("write_file").tags == {"write", "destructive", "idempotent", "closed_world"}
    assert m.tool("append_note").tags == {"write", "additive", "closed_world"}  # destructiveHint: false
    assert m.tool("delete_file").tags == {"write", "destructive", "closed_world"}
    assert m.tool("run_tests").tags == {"read", "verify", "closed_world"}
    assert m.tool("fetch_url").tags == {"read", "open_world"}
    assert targets(m)["write_file"] == "path" and targets(m)["read_file"] == "path"
    assert targets(m)["fetch_url"] is None


def test_example_openai():
    """OpenAI tool schemas: tags outside or inside `function`; explicit null target respected."""
    m = load_manifest(str(EXAMPLES / "openai_tools.json"))
    assert m.format == "openai"
    assert m.tool("edit_file").tags == {"write"}
    assert m.tool("edit_file").params == ("path", "start", "end", "text")
    assert m.tool("run_tests").target is None and not m.tool("run_tests").target_inferred
    assert targets(m)["delete_file"] == "path"


# ---- format details ----------------------------------------------------------------


def mcp_tool(name, annotations=None, props=("path",), **extra):
    tool = {"name": name, "inputSchema": {"type": "object", "properties": {p: {"type": "string"} for p in props}}}
    if annotations is not None:
        tool["annotations"] = annotations
    tool.update(extra)
    return tool


def test_mcp_defaults_follow_the_spec():
    """No annotations: not read-only, so write + destructive (+ open_world, also the default)."""
    m = parse_manifest({"tools": [mcp_tool("x")]}, "m.json")
    assert m.tool("x").tags == {"write", "destructive", "open_world"}
    m = parse_manifest({"tools": [mcp_tool("x", {"readOnlyHint": True, "destructiveHint": True})]}, "m.json")
    assert m.tool("x").tags == {"read", "open_world"}  # destructiveHint is meaningless when read-only


def test_mcp_hints_that_say_false_are_tags_too():
    """destructiveHint false on a write -> additive; openWorldHint false -> closed_world; read-only ignores the first."""
    tool = lambda name, **ann: mcp_tool(name, ann)  # noqa: E731
    m = parse_manifest(
        {
            "tools": [
                tool("add", readOnlyHint=False, destructiveHint=False),
                tool("look", readOnlyHint=True, destructiveHint=False, openWorldHint=False),
                tool("put", destructiveHint=False, idempotentHint=True, openWorldHint=False),
                mcp_tool("odd", {"destructiveHint": False}, tags=["destructive"]),
            ]
        },
        "m.json",
    )
    assert m.tool("add").tags == {"write", "additive", "open_world"}
    assert m.tool("look").tags == {"read", "closed_world"}
    assert m.tool("put").tags == {"write", "additive", "idempotent", "closed_world"}
    assert m.tool("odd").tags == {"write", "destructive", "open_world"}  # a declared tag is never contradicted


def test_mcp_envelope_equals_bare():
    """The JSON-RPC envelope and the bare result give the same tools."""
    tools = [mcp_tool("r", {"readOnlyHint": True}), mcp_tool("w")]
    bare = parse_manifest({"tools": tools}, "m.json")
    wrapped = parse_manifest({"jsonrpc": "2.0", "id": 3, "result": {"tools": tools}}, "m.json")
    assert bare.tools == wrapped.tools


def test_openai_forms():
    """The wrapped list, {"tools": [...]}, and the flat Responses-API form all read."""
    fn = {"name": "f", "parameters": {"type": "object", "properties": {"file": {}}}, "tags": ["read"]}
    a = parse_manifest([{"type": "function", "function": fn}], "o.json")
    b = parse_manifest({"tools": [{"type": "function", "function": fn}]}, "o.json")
    c = parse_manifest([{"type": "function", **fn}], "o.json")
    assert a.tools == b.tools == c.tools
    assert a.tool("f").tags == {"read"} and a.tool("f").params == ("file",)


def test_ours_parameters_and_inference():
    """Our format: string or object parameters; a missing target is inferred, null is not."""
    data = {
        "format": "rlvp-tools/1",
        "tools": [
            {"name": "rd", "tags": ["read"], "parameters": ["doc_id", "origin"]},
            {"name": "wr", "tags": ["write"], "parameters": [{"name": "origin"}, {"name": "doc_id", "type": "str"}]},
            {"name": "wr2", "tags": ["write"], "target": None, "parameters": ["doc_id"]},
        ],
    }
    m = parse_manifest(data, "t.json")
    assert targets(m) == {"rd": "doc_id", "wr": "doc_id", "wr2": None}  # origin is shared but no identifier
    assert m.tool("wr").params == ("origin", "doc_id")


def test_shared_non_identifier_is_no_target():
    """Tools sharing only non-identifier parameters (origin, date) get no target."""
    data = {
        "format": "rlvp-tools/1",
        "tools": [
            {"name": "search", "tags": ["read"], "parameters": ["origin", "date"]},
            {"name": "book", "tags": ["write"], "parameters": ["origin", "date"]},
        ],
    }
    m = parse_manifest(data, "t.json")
    assert targets(m) == {"search": None, "book": None} and m.notes == ()


@pytest.mark.parametrize(
    "name,expected",
    [
        ("reservation_id", True),
        ("id", True),
        ("path", True),
        ("file", True),
        ("filename", True),
        ("url", True),
        ("src_path", True),
        ("origin", False),
        ("date", False),
        ("item_ids", False),
        ("idea", False),
    ],
)
def test_identifier_params(name, expected):
    """Identifier-like names are ids, paths, files and urls."""
    assert is_identifier_param(name) is expected


# ---- errors --------------------------------------------------------------------------


def error_of(data, path="bad.json") -> str:
    with pytest.raises(ManifestError) as info:
        parse_manifest(data, path)
    return str(info.value)


def test_error_names_record_and_field():
    """A bad field names file, record and field, with the expected and the actual value."""
    tools = [{"name": f"t{i}", "tags": []} for i in range(3)] + [{"name": "t3", "tags": "read"}]
    msg = error_of({"format": "rlvp-tools/1", "tools": tools})
    assert msg == "bad.json: tools[3].tags: expected a list of strings, got a string 'read'"


@pytest.mark.parametrize(
    "data,needles",
    [
        ({"format": "rlvp-tools/2", "tools": []}, ["format", "rlvp-tools/1", "rlvp-tools/2"]),
        ({"format": "rlvp-tools/1"}, ["tools", "missing"]),
        ({"format": "rlvp-tools/1", "tools": [{"tags": []}]}, ["tools[0].name", "missing"]),
        (
            {"format": "rlvp-tools/1", "tools": [{"name": "a", "tags": ["read", 3]}]},
            ["tools[0].tags[1]", "non-empty string", "3"],
        ),
        (
            {"format": "rlvp-tools/1", "tools": [{"name": "a", "target": "x", "parameters": ["y"]}]},
            ["tools[0].target", "['y']", "'x'"],
        ),
        (
            {"format": "rlvp-tools/1", "tools": [{"name": "a"}, {"name": "a"}]},
            ["tools[1].name", "duplicate", "tools[0]"],
        ),
        (
            {"toolkits": {"agent": {"tools": [{"name": "a", "tag": "DELETE", "parameters": []}]}}},
            ["toolkits.agent.tools[0].tag", "READ, WRITE", "'DELETE'"],
        ),
        (
            {"tools": [{"name": "a", "inputSchema": {}, "annotations": {"readOnlyHint": "yes"}}]},
            ["tools[0].annotations.readOnlyHint", "true or false", "'yes'"],
        ),
        ([{"type": "function", "function": {"name": "", "parameters": {}}}], ["[0].function.name", "non-empty"]),
        ([{"type": "retrieval"}], ["[0].type", "'function'"]),
        ({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601}}, ["error", "-32601"]),
        ({"things": []}, ["unknown manifest format", "things"]),
        (
            {"toolkits": {"agent": {"tools": [{"name": "a", "tag": ["READ"]}]}}},
            ["toolkits.agent.tools[0]", "tag", "one of READ, WRITE, THINK, GENERIC"],
        ),
        (
            {"toolkits": {"agent": {"tools": [{"name": "a", "tag": {"READ": 1}}]}}},
            ["toolkits.agent.tools[0]", "tag", "one of READ, WRITE, THINK, GENERIC"],
        ),
        ({"tools": 3}, ["bad.json: tools: expected a list of tools, got a number 3"]),
        ("tools", ["expected a JSON object or list"]),
    ],
)
def test_errors(data, needles):
    """Malformed manifests raise ManifestError naming where and what."""
    msg = error_of(data)
    assert msg.startswith("bad.json")
    for needle in needles:
        assert needle in msg, (needle, msg)


def test_invalid_json_has_line_and_column(tmp_path):
    """Invalid JSON is reported with file:line:col."""
    path = tmp_path / "m.json"
    path.write_text('{"tools": [\n  {"name": "a",}\n]}\n', encoding="utf-8")
    with pytest.raises(ManifestError) as info:
        load_manifest(str(path))
    assert str(info.value).startswith(f"{path}:2:16: invalid JSON")


def test_json_lines_that_are_not_bfcl_docs_are_invalid_json(tmp_path):
    """A JSON-lines file is a manifest only as BFCL function docs: a trajectory file given as a manifest is
    invalid JSON at its second line, with a hint that a manifest is one JSON document."""
    path = tmp_path / "runs.jsonl"
    path.write_text('{"messages": []}\n{"messages": []}\n', encoding="utf-8")
    with pytest.raises(ManifestError) as info:
        load_manifest(str(path))
    assert str(info.value).startswith(f"{path}:2:1: invalid JSON") and "a manifest is one JSON document" in str(
        info.value
    )


def test_missing_file(tmp_path):
    """A missing file is a ManifestError, not an OSError."""
    with pytest.raises(ManifestError, match="file not found"):
        load_manifest(str(tmp_path / "nope.json"))


def test_roundtrip_of_example_through_json(tmp_path):
    """load_manifest equals parse_manifest of the same decoded JSON."""
    path = EXAMPLES / "mcp_tools_list.json"
    assert load_manifest(str(path)) == parse_manifest(json.loads(path.read_text()), str(path))


def test_load_manifest_refuses_a_device_or_fifo_in_one_error(tmp_path):
    """load_manifest on /dev/zero or a FIFO is a ManifestError naming it, not endless reading or a wait."""
    import os

    from rlvp_dsl.manifests import ManifestError, load_manifest

    fifo = tmp_path / "tools.json"
    os.mkfifo(fifo)
    for path, kind in (("/dev/zero", "character device"), (str(fifo), "FIFO")):
        with pytest.raises(ManifestError, match=kind) as info:
            load_manifest(path)
        assert path in str(info.value)
