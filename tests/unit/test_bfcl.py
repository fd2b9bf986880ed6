"""BFCL v4 multi-turn environment: ground-truth replays pass BFCL's checker through the env,
perturbed replays fail it and get the rule credit of rules/bfcl.rlvp, the manifest reader reads every
doc file, bad inputs are named, and without bfcl-eval the env says how to install it."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from rlvp_dsl import load_program
from rlvp_dsl.events import Episode, Event
from rlvp_dsl.manifests import ManifestError, load_manifest, parse_manifest
from trainer.envs import make_env
from trainer.envs.base import Task, ToolCall
from trainer.envs.bfcl import BfclEnv, available
from trainer.envs.bfcl.calls import parse_call, render_call

ROOT = Path(__file__).resolve().parents[2]
needs_bfcl = pytest.mark.skipif(not available(), reason="bfcl-eval is not installed (examples/setup.sh installs it)")


def play(env: BfclEnv, task_id: str, turns: list[list[ToolCall]]) -> Episode:
    """Play `turns` (calls per user turn) through `env`; the episode as the rollout writes it."""
    events: list[Event] = []

    def add(**fields) -> None:
        events.append(Event(index=len(events), **fields))

    message: str | None = env.reset(Task(task_id, 0))
    tags = {t["name"]: t["tags"] for t in env.manifest()["tools"]}
    for calls in turns:
        assert message is not None
        add(kind="user", text=message, signals=dict(env.signals()))
        for call in calls:
            result = env.step(call)
            add(
                kind="call",
                tool=call.tool,
                arguments=dict(call.arguments),
                status="ok" if result.ok else "error",
                error_text="" if result.ok else result.text,
                result=result.text if result.ok else "",
                tags=tags.get(call.tool, ()),
                signals=dict(result.signals),
            )
        message = env.end_turn("answer")
        add(kind="assistant", text="answer", signals=dict(env.signals()))  # the turn's state check, after end_turn
    return Episode(task_id, tuple(events), outcome=env.outcome())


@needs_bfcl
def test_every_default_task_replays_to_a_pass():
    """The ground truth of every task of the default subset passes BFCL's checker through the env."""
    env = BfclEnv()
    assert len(env.tasks) == 49  # of 200 multi_turn_base tasks (the rest need computed values, or more values)
    for task in env.tasks:
        env.reset(Task(task.id, 0))
        episode = play(env, task.id, env.ground_truth())
        assert env.verdict() == {"valid": True}, (task.id, env.verdict())
        assert episode.outcome == 1.0
        assert env.signals()["turns_matched"] == len(task.turns)
        assert [e.signals["off_path"] for e in episode.calls] == [0.0] * len(episode.calls), task.id
        # the call that completes each turn reports it passing (so an answer right after it is paid)
        closing = [before for before, event in zip(episode.events, episode.events[1:]) if event.kind == "assistant"]
        assert all(e.signals["turn_passing"] == 1.0 for e in closing if e.kind == "call"), task.id


@needs_bfcl
def test_all_tasks_replay_without_the_value_sets():
    """Without the playable filter, 199 of 200 base tasks replay to a pass (173's ground truth breaks its doc's types)."""
    env = BfclEnv(playable_only=False)
    failed = []
    for task in env.tasks:
        env.reset(Task(task.id, 0))
        play(env, task.id, env.ground_truth())
        if not env.verdict()["valid"]:
            failed.append(task.id)
    assert failed == ["multi_turn_base_173"]


def _credits(program, episode: Episode) -> dict[str, float]:
    out: dict[str, float] = {}
    for credit in program.score(episode):
        out[credit.rule] = round(out.get(credit.rule, 0.0) + credit.value, 6)
    return out


@needs_bfcl
def test_perturbed_replays_fail_and_get_rule_credit():
    """Wrong argument, skipped call, repeated failing call: each fails the checker and gets the expected credit."""
    program = load_program(str(ROOT / "rules" / "bfcl.rlvp"))
    env = BfclEnv()
    task_id = "multi_turn_base_1"  # ls; cd + mv; cd + grep; tail
    env.reset(Task(task_id, 0))
    truth = env.ground_truth()
    clean = _credits(program, play(env, task_id, truth))
    assert env.outcome() == 1.0
    # 4 turns passed; the count rises on the call that passes each turn (the last turn's too): 4 x 0.2
    assert clean.get("turns_progress") == pytest.approx(0.8)
    assert "errored_call" not in clean

    # a wrong argument: cd into a folder that does not exist
    wrong = [list(t) for t in truth]
    wrong[1][0] = ToolCall("cd", {"folder": "nowhere"})
    episode = play(env, task_id, wrong)
    credits = _credits(program, episode)
    assert env.outcome() == 0.0
    assert credits["errored_call"] < 0
    # the failed cd and the mv after it (run in the wrong folder) left turn 2's path; once turn 2 failed,
    # no call is judged
    assert [e.signals["off_path"] for e in episode.calls] == [0.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    # turn 1 passes on its call; turn 2 never does, and nothing after it can
    assert [e.signals["turn_passing"] for e in episode.calls] == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert credits["left_path"] == pytest.approx(-0.2)
    assert credits.get("turns_progress", 0) < clean["turns_progress"]

    # a skipped call: the move of turn 2 left out
    skipped = [list(t) for t in truth]
    del skipped[1][1]
    credits = _credits(program, play(env, task_id, skipped))
    assert env.outcome() == 0.0
    assert env.verdict()["error_type"] == "multi_turn:instance_state_mismatch"
    assert credits.get("turns_progress", 0) == pytest.approx(0.2)  # only turn 1 matches
    assert "idle_answer" not in credits and "idle_answer" not in clean

    # a skipped turn: turn 3 answered without a call (BFCL: empty_turn_model_response)
    idle = [list(t) for t in truth]
    idle[2] = []
    credits = _credits(program, play(env, task_id, idle))
    assert env.outcome() == 0.0
    assert env.verdict()["error_type"] == "multi_turn:empty_turn_model_response"
    assert credits["idle_answer"] == pytest.approx(-0.3)
    assert credits.get("turns_progress", 0) == pytest.approx(0.4)  # turns 1 and 2

    # an ok call the turn does not make (pwd), then the ground truth of turn 1
    detour = [list(t) for t in truth]
    detour[0] = [ToolCall("pwd", {})] + detour[0]
    episode = play(env, task_id, detour)
    assert [e.status for e in episode.calls][:2] == ["ok", "ok"]
    assert [e.signals["off_path"] for e in episode.calls][:2] == [1.0, 0.0]

    # a repeated failing call
    repeated = [list(t) for t in truth]
    repeated[0] = [ToolCall("cat", {"file_name": "missing.txt"})] * 2 + repeated[0]
    credits = _credits(program, play(env, task_id, repeated))
    assert credits["repeat_error"] == pytest.approx(-0.3)
    assert credits["errored_call"] == pytest.approx(-0.2)


@needs_bfcl
def test_bad_arguments_are_error_results():
    """An unknown parameter, a wrong type or an unknown function is an error result, never a crash."""
    env = BfclEnv()
    env.reset(Task("multi_turn_base_1", 0))
    for call, expected in (
        (ToolCall("ls", {"b": "True"}), "unknown parameter 'b'"),
        (ToolCall("tail", {"file_name": "log.txt", "lines": "many"}), "must be an integer"),
        (ToolCall("launch", {}), "unknown function 'launch'"),
        (ToolCall("cat", {}), "missing required parameter 'file_name'"),
    ):
        result = env.step(call)
        assert not result.ok and expected in result.text


@needs_bfcl
def test_bad_knobs_are_named():
    """An unknown task id or category, a bad knob: a ValueError naming it."""
    with pytest.raises(ValueError, match="unknown task id 'multi_turn_base_999'"):
        make_env("bfcl", task_ids=["multi_turn_base_999"])
    with pytest.raises(ValueError, match="'category' must be one of .*did you mean 'multi_turn_base'"):
        make_env("bfcl", category="multi_turn_bse")
    with pytest.raises(ValueError, match="'task_ids' must name at least one task"):
        make_env("bfcl", task_ids=[])
    with pytest.raises(ValueError, match="unknown knob 'colour'"):
        make_env("bfcl", colour="red")
    with pytest.raises(ValueError, match="knob 'task_ids' must be a list of strings"):
        make_env("bfcl", task_ids="multi_turn_base_0")
    with pytest.raises(ValueError, match="'max_calls_per_turn' must be a positive integer"):
        make_env("bfcl", max_calls_per_turn=0)
    with pytest.raises(ValueError, match="'draw' must be one of seed, cycle \\(got 'round'\\)"):
        make_env("bfcl", draw="round")
    with pytest.raises(ValueError, match="draw = 'cycle' needs task ids that end in a number \\(got 'bfcl-x'\\)"):
        make_env("bfcl", draw="cycle").pick(Task("bfcl-x", 0))


@needs_bfcl
def test_draw_cycle_plays_every_task_once_per_iteration():
    """``draw = "cycle"``: the trainer's ``bfcl-k`` plays subset[k % n] whatever its seed, so an
    iteration of n groups plays each task once; ``seed`` (the default) draws by the task's seed."""
    knobs = dict(max_gt_calls_per_turn=1, tools="path", max_values=3, max_calls_per_turn=2)
    cycled, seeded = make_env("bfcl", draw="cycle", **knobs), make_env("bfcl", **knobs)
    subset = [t.id for t in cycled.tasks]
    assert subset == [f"multi_turn_base_{k}" for k in (42, 101, 115, 122, 130, 139)]
    tasks = [Task(f"bfcl-{k}", seed) for k, seed in enumerate([5, 5, 5, 5, 5, 5, 11, 0])]
    assert [cycled.pick(t).id for t in tasks] == subset + subset[:2]
    assert [seeded.pick(t).id for t in tasks] == [subset[5]] * 6 + [subset[11 % 6], subset[0]]
    assert cycled.pick(Task("multi_turn_base_130", 0)).id == "multi_turn_base_130"  # a BFCL id names its task


@needs_bfcl
def test_schema_vocabulary_and_manifest():
    """The schema's values, the words of the turns and the signal are all in the vocabulary and manifest."""
    env = make_env("bfcl")
    first = env.reset(Task("bfcl-0", 5))
    words = env.vocabulary()
    assert set(first.split()) <= words
    for spec in env.schema():
        assert spec.name in words
        for p in spec.params or ():
            assert all(set(str(v).split()) <= words for v in spec.values_for(p))
    manifest = parse_manifest(env.manifest())
    assert [s.name for s in manifest.signals] == ["turns_matched", "off_path", "turn_passing"]
    assert env.signals() == {"turns_matched": 0.0}


def test_call_parser_never_evaluates():
    """Ground-truth strings parse to literals; anything but a literal argument is refused."""
    assert parse_call("sort('a.pdf')", ["file_name"]) == ("sort", {"file_name": "a.pdf"})
    assert parse_call("post_tweet(content='x', tags=['#a'], n=2.5, b=True)") == (
        "post_tweet",
        {"content": "x", "tags": ["#a"], "n": 2.5, "b": True},
    )
    for text in ("ls(a=__import__('os'))", "os.system('x')", "ls(a=f())", "ls(**k)", "1 + 1"):
        with pytest.raises(ValueError):
            parse_call(text)
    assert render_call("mv", {"source": "a'b", "destination": "t"}) == "mv(source=\"a'b\", destination='t')"


@needs_bfcl
def test_manifest_reader_on_every_doc_file():
    """Every doc file of the package reads as format bfcl, every function tagged, the signal declared."""
    from trainer.envs.bfcl.tasks import doc_files

    files = doc_files()
    assert len(files) == 12
    for path in files:
        manifest = load_manifest(str(path))
        assert manifest.format == "bfcl"
        assert all(t.tags for t in manifest.tools), path.name
        assert [s.name for s in manifest.signals] == ["turns_matched", "off_path", "turn_passing"]
    fs = load_manifest(str(next(p for p in files if p.name == "gorilla_file_system.json")))
    assert fs.tool("mv").tags == {"write", "destructive"} and fs.tool("mv").target == "source"
    assert fs.tool("ls").tags == {"read"}


def test_manifest_reader_names_a_bad_line(tmp_path):
    """A bad line of a JSON-lines doc file is named by file and line."""
    good = '{"name": "ls", "description": "", "parameters": {"type": "dict", "properties": {}}}'
    path = tmp_path / "docs.json"
    path.write_text(good + "\n{not json\n", encoding="utf-8")
    with pytest.raises(ManifestError, match=r"docs.json:2:2: invalid JSON line"):
        load_manifest(str(path))
    path.write_text(good + "\n" + good.replace('"ls"', '"rm"') + "\n", encoding="utf-8")
    assert [t.name for t in load_manifest(str(path)).tools] == ["ls", "rm"]


def test_without_the_package_the_env_says_how_to_install_it():
    """With bfcl_eval blocked, make_env('bfcl') raises the pip line and rlvp-train exits 2 naming it."""
    code = (
        "import sys; sys.modules['bfcl_eval'] = None\n"
        "from trainer.envs import make_env\n"
        "try:\n    make_env('bfcl')\nexcept ModuleNotFoundError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert 'pip install --no-deps "bfcl-eval==2026.3.23"' in out.stdout, out.stderr
    assert "Traceback" not in out.stderr


def test_rlvp_train_without_the_package_exits_2():
    """rlvp-train with env = "bfcl" and bfcl_eval blocked: the pip line, exit 2, no traceback."""
    code = (
        "import sys; sys.modules['bfcl_eval'] = None\n"
        "sys.argv = ['rlvp-train', 'examples/bfcl.toml', '--out', sys.argv[1]]\n"
        "from trainer.cli.entry import run\n"
        "run()\n"
    )
    with tempfile.TemporaryDirectory() as out:
        done = subprocess.run(
            [sys.executable, "-c", code, str(Path(out) / "run")], cwd=ROOT, capture_output=True, text=True, timeout=120
        )
    assert done.returncode == 2, done.stderr
    assert 'pip install --no-deps "bfcl-eval==2026.3.23"' in done.stderr
    assert "Traceback" not in done.stderr


@needs_bfcl
def test_auto_from_tags_on_every_doc_file():
    """Rules derived from every doc file compile lint-clean (`rlvp-compile --auto-from-tags`; the slower
    `--check rules/bfcl.rlvp --manifest posting_api.json` is in the report, not here)."""
    from rlvp_dsl.manifests.derive import derive_text
    from rlvp_dsl.pipeline import check_text
    from trainer.envs.bfcl.tasks import doc_files

    for path in doc_files():
        result = check_text(derive_text(load_manifest(str(path))), str(ROOT / "derived.rlvp"), lints=True)
        assert result.ok and result.diagnostics == [], (path.name, [d.message for d in result.diagnostics])


@needs_bfcl
def test_every_call_of_every_task_is_told_apart_in_words():
    """No two calls of a task's schema render to the same words (a word-level trie can tell them apart),
    and every word of every value is in the vocabulary."""
    from trainer.envs.base import all_calls

    env = BfclEnv()
    words = env.vocabulary()
    for task in env.tasks:
        env.reset(Task(task.id, 0))
        seen: dict[tuple[str, ...], ToolCall] = {}
        for spec in env.schema():
            for call in all_calls(spec):
                key = tuple(" ".join([call.tool, *map(str, call.arguments.values())]).split())
                assert key not in seen, (task.id, seen[key], call)
                seen[key] = call
                assert set(key) <= words


@needs_bfcl
def test_random_calls_never_crash_or_hang():
    """300 uniformly drawn calls of every default task's schema (seeded) all come back as results;
    a costly argument (power's exponent, math precision) is refused, not computed."""
    import random

    from trainer.envs.base import all_calls

    env = BfclEnv()
    rng = random.Random(0)
    for task in env.tasks:
        env.reset(Task(task.id, 0))
        calls = [c for spec in env.schema() for c in all_calls(spec)]
        for call in rng.sample(calls, min(300, len(calls))):
            assert isinstance(env.step(call).text, str)
    from trainer.envs.bfcl.backends import Backends
    from trainer.envs.bfcl.tasks import load_category

    math_task = next(t for t in load_category("multi_turn_base") if "MathAPI" in t.involved_classes)
    result = Backends(math_task).execute("power", {"base": 67410, "exponent": 67410})
    assert not result.ok and "'exponent' must be at most 1000" in result.text
