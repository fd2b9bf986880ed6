"""Conversations in the compact trainer: the dialog env under the ConversationEnv protocol, its
rollouts as tokens and events (answers, user turns, forced answers), their scoring and credit,
and a two-iteration training run."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from rlvp_dsl import loads
from rlvp_dsl.attach import episode_token_credits, score_calls
from rlvp_dsl.events import ASSISTANT, CALL, ERROR, OK, USER
from trainer.envs import all_calls, make_env, make_tasks
from trainer.envs.base import END_TURN, ConversationEnv, ToolCall, ToolEnv
from trainer.model import TinyModelConfig, build_tiny_model
from trainer.sampling import rollout as rollout_mod
from trainer.sampling.call_grammar import CallFormat, CallTrie
from trainer.sampling.generation import GenConfig, TurnSample
from trainer.sampling.rollout import collect_group, prompt_words
from trainer.sampling.tokenizer import ChatFormat, build_tiny_tokenizer, encode

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tok():
    return build_tiny_tokenizer(prompt_words(make_env("dialog3"), ("plain", "json")))


class Script:
    """A scripted generator (`sample_turns`): each episode plays its own list of actions in order
    (a `ToolCall` or `END_TURN`), looked up in the trie the rollout passes."""

    def __init__(self, plans):
        self.plans = [list(p) for p in plans]
        self.tries = []

    def sample_turns(self, contexts, trie, cfg):
        self.tries.append(trie)
        assert len(contexts) == len(self.plans)  # the test plays one episode
        out = []
        for plan in self.plans:
            action = plan.pop(0)
            call = ToolCall(END_TURN, {}) if action == END_TURN else action
            index = trie.calls.index(call)
            ids = trie.ids[index] + [trie.eos_id]
            n = len(ids)
            out.append(
                TurnSample(ids, [0.0] * n, [0.0] * n, [None] * n, trie.calls[index], trie.texts[index], 0, n - 1, True)
            )
        return out


def _play(tok, plan, name="dialog", task=None, cfg=None, **knobs):
    env = make_env(name, **knobs)
    task = task or make_tasks(1, seed=3)[0]
    env.reset(task)
    actions = plan(env) if callable(plan) else plan
    (r,) = collect_group(Script([actions]), tok, lambda: make_env(name, **knobs), task, 1, cfg or GenConfig(), seed=0)
    return r


def test_dialog_is_a_conversation_env_and_chain_is_not():
    env = make_env("dialog")
    assert isinstance(env, ConversationEnv) and isinstance(env, ToolEnv)
    assert not isinstance(make_env("chain4"), ConversationEnv)
    assert env.name == "dialog2" and make_env("dialog3").name == "dialog3" and END_TURN == "answer"
    with pytest.raises(RuntimeError, match="reset"):
        env.schema()  # per task: valid only after reset
    assert [t["name"] for t in env.manifest()["tools"]] == ["find", "book", "cancel"]


def test_ground_truth_conversation_events_by_value(tok):
    """The ground truth gives, in order: user, call, assistant, user, call, assistant, with the
    statuses, texts, tags and signals of the protocol, and outcome 1."""
    r = _play(tok, lambda env: env.expected_actions())
    env = make_env("dialog")
    first = env.reset(make_tasks(1, seed=3)[0])
    team = first.split()[4]
    room = env.expected_actions()[2].arguments["room"]
    got = [(e.kind, e.tool, dict(e.arguments), e.status, e.text or e.result, dict(e.signals)) for e in r.episode.events]
    assert got == [
        (USER, None, {}, OK, f"which room does team {team} use ?", {"steps_remaining": 2.0}),
        (CALL, "find", {"team": team}, OK, f"team {team} uses room {room}", {"steps_remaining": 1.0}),
        (ASSISTANT, None, {}, OK, "answer", {}),
        (USER, None, {}, OK, "book that room please .", {"steps_remaining": 1.0}),
        (CALL, "book", {"room": room}, OK, got[4][4], {"steps_remaining": 0.0}),
        (ASSISTANT, None, {}, OK, "answer", {}),
    ]
    assert got[4][4].startswith(f"booked room {room} ticket t")
    assert r.outcome == 1.0 and r.episode.outcome == 1.0
    assert [e.tags for e in r.episode.calls] == [frozenset({"read"}), frozenset({"write"})]
    assert r.info["answers"] == 2 and r.info["forced_answers"] == 0 and r.info["call_event_indices"] == [1, 4]


def test_conversation_tokens_are_the_separately_tokenised_pieces(tok):
    """Generated ids (mask 1) are the calls and answers as sampled; between them sit exactly the
    tool message and the next user turn, each tokenised on its own (mask 0); spans decode to the calls."""
    r = _play(tok, lambda env: env.expected_actions())
    chat = ChatFormat.from_tokenizer(tok)
    call_texts = r.info["call_texts"]
    results = [e.result for e in r.episode.calls]
    expected, mask = [], []
    pieces = [
        (encode(tok, call_texts[0]) + [tok.eos_token_id], 1),
        (chat.after_turn_ids(tok, results[0], True, next_turn=True), 0),
        (encode(tok, END_TURN) + [tok.eos_token_id], 1),
        (chat.user_turn_ids(tok, "book that room please .", True), 0),
        (encode(tok, call_texts[1]) + [tok.eos_token_id], 1),
        (chat.after_turn_ids(tok, results[1], True, next_turn=True), 0),
        (encode(tok, END_TURN) + [tok.eos_token_id], 1),
        (chat.user_turn_ids(tok, None, True), 0),
    ]
    for ids, m in pieces:
        expected += ids
        mask += [m] * len(ids)
    assert r.completion_ids == expected and r.completion_mask == mask
    assert [tok.decode(r.completion_ids[a:b]) for a, b in r.call_spans] == call_texts
    text = tok.decode(r.prompt_ids + r.completion_ids)
    assert "<|assistant|> answer <|end|> <|user|> book that room please . <|end|> <|assistant|>" in text
    assert "write answer ." in text  # the system prompt says how to answer


def test_forced_answer_after_max_calls_per_turn(tok):
    """Three failing calls in turn 1 force END_TURN: the rollout writes its ids (mask 0), an
    assistant event, and the next user turn; the episode's calls are still capped by max_turns."""

    def plan(env):
        room_values = env.schema()[2].values_for("room")
        return (
            [ToolCall("cancel", {"room": room_values[0]})] * 3
            + [END_TURN]
            + [ToolCall("cancel", {"room": room_values[0]})] * 3
        )

    r = _play(tok, plan)
    kinds = [e.kind for e in r.episode.events]
    assert kinds == [USER, CALL, CALL, CALL, ASSISTANT, USER, ASSISTANT]
    assert [e.status for e in r.episode.calls] == [ERROR] * 3 and r.outcome == 0.0
    assert r.info["forced_answers"] == 1 and r.info["answers"] == 2
    chat = ChatFormat.from_tokenizer(tok)
    third_end = r.call_spans[2][1] + 1  # after the third call's EOS
    after = chat.after_turn_ids(tok, r.episode.calls[2].error_text, True, next_turn=True)
    forced = encode(tok, END_TURN) + [tok.eos_token_id]
    user = chat.user_turn_ids(tok, "book that room please .", True)
    n = len(after) + len(forced) + len(user)
    assert r.completion_ids[third_end : third_end + n] == after + forced + user
    assert r.completion_mask[third_end : third_end + n] == [0] * n  # forced: the policy chose none of it
    assert r.completion_mask[third_end + n : third_end + n + 2] == [1, 1]  # the sampled answer of turn 2

    # max_turns caps the calls of the whole episode across turns
    capped = _play(
        tok, lambda env: [ToolCall("cancel", {"room": env.schema()[2].values_for("room")[0]})] * 4, max_turns=2
    )
    assert [e.kind for e in capped.episode.events] == [USER, CALL, CALL] and capped.outcome == 0.0


def test_answer_without_the_call_fails_the_turn_and_state_is_checked_per_turn(tok):
    """Answering turn 1 before finding the room fails the verdict even if turn 2 books correctly; booking
    in turn 1 (before the user asked) is an error."""
    env = make_env("dialog")
    env.reset(make_tasks(1, seed=3)[0])
    find, _, book, _ = env.expected_actions()
    assert env.step(book).ok is False  # out of order
    assert env.step(find).ok is True and env.step(book).ok is False  # turn 2's step in turn 1: not asked yet
    assert env.end_turn() == "book that room please ." and env.step(book).ok is True
    assert env.end_turn() is None and env.outcome() == 1.0
    env.reset(make_tasks(1, seed=3)[0])
    assert env.end_turn() is not None  # answered turn 1 without acting
    assert env.step(find).ok is False and env.end_turn() is None and env.outcome() == 0.0


def test_cancel_undoes_the_booking_and_progress_is_not_paid_twice(tok):
    """cancel on the booked room sets steps_remaining back; rebooking reaches the old best, which
    the progress rule does not pay again."""

    def plan(env):
        find, _, book, _ = env.expected_actions()
        return [find, END_TURN, book, ToolCall("cancel", dict(book.arguments)), book, END_TURN]

    r = _play(tok, plan)
    assert [e.signals["steps_remaining"] for e in r.episode.calls] == [1.0, 0.0, 1.0, 0.0]
    assert [e.status for e in r.episode.calls] == [OK, OK, OK, OK] and r.outcome == 1.0
    program = loads((ROOT / "examples/rules/dialog_dense.rlvp").read_text(), path=str(ROOT / "examples/rules/x.rlvp"))
    assert list(score_calls(program, r.episode).values) == [1.0, 1.0, 0.0, 0.0]


def test_rules_score_conversations_since_user_resets_and_credit_lands_on_the_call_tokens(tok):
    """A `user` event between turns resets `since user`; each call's credit is on exactly its span's
    tokens, a sampled answer's credit on exactly its own tokens (`Rollout.turn_spans`); without the
    answer's span (TRL, verl) the answer's credit is spread over every action token."""
    source = """
tools from "../manifests/dialog_tools.json"
violation failed_call (-0.25) { on call error }
progress step_done (+1.0) { signal steps_remaining decreasing }
violation idle_answer (-0.5) { on assistant unless seen (call ok since user) }
violation second_call_in_turn (-0.125) { on call and seen (call since user) }
"""
    program = loads(source, path=str(ROOT / "examples/rules/inline.rlvp"))

    def plan(env):
        find, _, book, _ = env.expected_actions()
        return [ToolCall("cancel", dict(book.arguments)), find, END_TURN, END_TURN]  # turn 2 answered idle

    r = _play(tok, plan)
    assert [e.kind for e in r.episode.events] == [USER, CALL, CALL, ASSISTANT, USER, ASSISTANT]
    credits = score_calls(program, r.episode)
    # cancel: failed (-0.25); find: progress (+1) and the turn's second call (-0.125); turn 2's
    # answer had no call since its user message (-0.5, on the assistant event), turn 1's had one
    assert list(credits.values) == [-0.25, 0.875] and credits.unattached == -0.5
    assert credits.turn_values == ((5, -0.5),)
    # both answers were sampled: each has its span, the tokens of `answer` (the EOS after it excluded)
    assert sorted(r.turn_spans) == [3, 5]
    assert [tok.decode(r.completion_ids[a:b]) for a, b in r.turn_spans.values()] == [END_TURN, END_TURN]
    n = len(r.completion_ids)
    per_token = episode_token_credits(credits, r.call_spans, n, r.completion_mask, turn_spans=r.turn_spans)
    a5, b5 = r.turn_spans[5]
    for t, value in enumerate(per_token):
        in_span = [k for k, (a, b) in enumerate(r.call_spans) if a <= t < b]
        want = (credits.values[in_span[0]] if in_span else 0.0) + (-0.5 if a5 <= t < b5 else 0.0)
        assert value == want, t
    spread = episode_token_credits(credits, r.call_spans, n, r.completion_mask)
    for t, (value, m) in enumerate(zip(spread, r.completion_mask, strict=True)):
        in_span = [k for k, (a, b) in enumerate(r.call_spans) if a <= t < b]
        want = (credits.values[in_span[0]] if in_span else 0.0) + (-0.5 if m else 0.0)
        assert value == want, t
    assert r.outcome == 0.0


def test_a_forced_answer_has_no_span_and_its_credit_is_spread(tok):
    """The rollout forced turn 1's answer (mask 0, no span) after three failed calls; turn 2's answer
    was sampled with no call.  The forced answer's -2 (no ok call) is spread over every action token,
    the sampled one's -3 (no call, no ok call) lands on its tokens only."""
    program = loads(
        """
tools from "../manifests/dialog_tools.json"
violation answered (-1.0) { on assistant unless seen (call since user) }
violation no_ok_call (-2.0) { on assistant unless seen (call ok since user) }
""",
        path=str(ROOT / "examples/rules/inline.rlvp"),
    )

    def plan(env):
        room = env.schema()[2].values_for("room")[0]
        return [ToolCall("cancel", {"room": room})] * 3 + [END_TURN]

    r = _play(tok, plan)
    assert [e.kind for e in r.episode.events] == [USER, CALL, CALL, CALL, ASSISTANT, USER, ASSISTANT]
    assert list(r.turn_spans) == [6]  # the forced answer (event 4) has none
    credits = score_calls(program, r.episode)
    assert credits.turn_values == ((4, -2.0), (6, -3.0))
    per_token = episode_token_credits(
        credits, r.call_spans, len(r.completion_ids), r.completion_mask, turn_spans=r.turn_spans
    )
    a, b = r.turn_spans[6]
    for t, (value, m) in enumerate(zip(per_token, r.completion_mask, strict=True)):
        assert value == (-2.0 if m else 0.0) + (-3.0 if a <= t < b else 0.0), t


def test_the_trie_follows_the_per_task_schema(tok):
    """Tasks with other value sets get other tries (END_TURN last in each); one trie per schema."""
    tasks = make_tasks(6, seed=1)
    script_tries = []
    for task in tasks:
        s = Script([[END_TURN, END_TURN]])
        collect_group(s, tok, lambda: make_env("dialog"), task, 1, GenConfig(), seed=0)
        script_tries.append(s.tries[0])
    values = []
    for task, trie in zip(tasks, script_tries, strict=True):
        env = make_env("dialog")
        env.reset(task)
        want = [c for spec in env.schema() for c in all_calls(spec)]
        assert trie.calls[:-1] == want and trie.calls[trie.end_turn] == ToolCall(END_TURN, {})
        assert trie.texts[-1] == "answer"
        values.append(tuple(trie.texts))
    assert len(set(values)) > 1  # the value sets differ per task
    by_schema: dict = {}
    for v, trie in zip(values, script_tries, strict=True):
        assert by_schema.setdefault(v, trie) is trie  # the same schema: the cached trie


def test_end_turn_is_refused_as_a_tool_name_and_rendered_in_both_styles(tok):
    from rlvp_dsl.tools import ToolSpec

    with pytest.raises(ValueError, match="named 'answer'"):
        CallTrie.build([ToolSpec("answer", params=("x",), values={"x": ("r1",)})], tok, end_turn=True)
    trie = CallTrie.build(
        [ToolSpec("find", params=("team",), values={"team": ("red",)})], tok, CallFormat("json"), True
    )
    assert trie.texts == ['{"name": "find", "arguments": {"team": "red"}}', '{"name": "answer", "arguments": {}}']
    assert not CallTrie.build([ToolSpec("find", params=("team",), values={"team": ("red",)})], tok).end_turn


def test_a_template_without_user_turn_pieces_says_so():
    chat = ChatFormat("a", "b", "c", "d", 2, "<|end|>")
    assert chat.user_turn_text(None, False) == "a"
    with pytest.raises(ValueError, match="user message after an assistant turn"):
        chat.user_turn_text("hello", False)


def test_untrained_model_plays_dialog_with_valid_actions(tok):
    """A random tiny model answers and calls under the mask; every turn ends; events and tokens agree."""
    model = build_tiny_model(tok, TinyModelConfig(seed=0))
    for name in ("dialog", "dialog3"):
        rollouts = collect_group(model, tok, lambda n=name: make_env(n), make_tasks(1, seed=5)[0], 6, GenConfig(), 2)
        for r in rollouts:
            assert r.episode.events[0].kind == USER and r.episode.events[-1].kind in (ASSISTANT, CALL)
            answers = [e for e in r.episode.events if e.kind == ASSISTANT]
            users = [e for e in r.episode.events if e.kind == USER]
            assert len(answers) == r.info["answers"] and len(users) == len(answers) + (
                r.episode.events[-1].kind == CALL
            )
            assert len(r.call_spans) == len(r.episode.calls) <= make_env(name).max_turns
            assert sum(r.completion_mask) == sum(b - a + 1 for a, b in r.call_spans) + 2 * (
                r.info["answers"] - r.info["forced_answers"]
            )


def test_two_iterations_of_training_on_dialog(tmp_path):
    """examples/dialog.toml trains end to end (rlvp: live groups from process credit)."""
    from trainer.config import load_config
    from trainer.loop import train

    cfg = load_config(ROOT / "examples" / "dialog.toml", out_dir=str(tmp_path), iterations=2)
    rows = train(cfg.replace(tasks_per_iteration=2, num_generations=4), progress=False)
    assert [r["iteration"] for r in rows] == [0, 1] and rows[-1]["rollout/episodes_generated"] == 16
    assert rows[0]["process/weight"] == 1.0 and (tmp_path / "metrics.jsonl").exists()


def test_rollout_module_documents_the_forced_answer():
    assert "forced" in rollout_mod.__doc__ and "mask 0" in rollout_mod.__doc__
