"""rlvp_dsl.integrations.ray on a local Ray cluster (``ray.init(num_cpus=2)``, shut down after): the credit
hash equals serial rlvp-score's, also after an actor dies mid-run; a malformed record is named, not fatal;
Parquet in and out (a row per episode, credits as a list column)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from conftest import DATA, REPO  # noqa: E402
from rlvp_dsl.cli.score import main as score_main  # noqa: E402
from rlvp_dsl.integrations.ray import (  # noqa: E402
    RolloutScorer,
    dataset_hash,
    read_rollouts,
    score_dataset,
)

RULES = str(REPO / "rules" / "tau2_airline.rlvp")
EPISODES = REPO / "examples" / "episodes"
CHAT = EPISODES / "airline_chat.jsonl"


@pytest.fixture(scope="module", autouse=True)
def cluster():
    """A local two-CPU cluster for the module, as the verl tests start one."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()


def serial_hash(capsys: pytest.CaptureFixture[str], *paths: str) -> str:
    """The credit hash serial rlvp-score prints for `paths` (its last line)."""
    score_main([RULES, *paths])
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith("credit hash: sha256:")
    return out[-1].removeprefix("credit hash: ")


def test_hash_equals_serial_on_the_example_episodes(capsys, tmp_path):
    expected = serial_hash(capsys, str(EPISODES))
    scored = score_dataset(read_rollouts([str(EPISODES)]), RULES).materialize()
    digest, episodes, errors = dataset_hash(scored)
    assert (digest, episodes, errors) == (expected, 6, [])
    # one row per episode, credits by value as the serial scorer gives them
    from rlvp_dsl.pipeline import load_program
    from rlvp_dsl.readers import read_paths

    program = load_program(RULES)
    serial = {e.id: program.score(e) for e in read_paths(str(EPISODES))}
    rows = {r["id"]: r for r in scored.take_all()}
    assert rows.keys() == serial.keys()
    for episode_id, credits in serial.items():
        got = [(c["event_index"], c["rule"], c["value"], c["reason"]) for c in rows[episode_id]["credits"]]
        assert got == [(c.event_index, c.rule, c.value, c.reason) for c in credits]
        assert rows[episode_id]["total"] == pytest.approx(sum(c.value for c in credits))
    assert any(rows[i]["credits"] for i in rows), "the examples earn some credit"


def test_cli_ray_prints_the_serial_hash_and_writes_parquet(capsys, tmp_path):
    expected = serial_hash(capsys, str(EPISODES))
    out_dir = tmp_path / "scored"
    assert score_main([RULES, str(EPISODES), "--ray", "--ray-out", str(out_dir)]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"credit hash: {expected}"
    table = pq.read_table(out_dir)
    assert table.num_rows == 6
    assert pa.types.is_list(table.schema.field("credits").type)
    assert {"cancel_confirmed", "ends_on_call"} <= set(table.column("id").to_pylist())


def test_cli_ray_refuses_options_it_does_not_take(capsys):
    assert score_main([RULES, str(EPISODES), "--ray", "--json"]) == 2
    assert "does not go with --json" in capsys.readouterr().err


def test_parquet_records_score_as_their_jsonl(capsys, tmp_path):
    lines = [line for line in CHAT.read_text().splitlines() if line.strip()]
    pq.write_table(pa.table({"record": lines}), tmp_path / "chat.parquet")
    expected = serial_hash(capsys, str(CHAT))
    assert dataset_hash(score_dataset(read_rollouts(str(tmp_path)), RULES)) == (expected, len(lines), [])


def test_malformed_record_is_named_not_fatal(capsys, tmp_path):
    good = CHAT.read_text().splitlines()[0]
    bad = tmp_path / "mixed.jsonl"
    bad.write_text(
        "\n".join(
            [
                good,
                '{"id": "cut", "messages": [',
                '{"id": "no_messages"}',
                good.replace('"cancel_confirmed"', '"again"'),
            ]
        )
        + "\n"
    )
    expected = serial_hash(capsys, str(bad))  # serial rlvp-score leaves the two bad lines out too
    digest, episodes, errors = dataset_hash(score_dataset(read_rollouts(str(bad)), RULES))
    assert (digest, episodes) == (expected, 2)
    assert len(errors) == 2
    cut, missing = sorted(errors, key=lambda e: ": line 3" in e)
    assert cut.startswith(f"{bad}:2:") and "invalid JSON" in cut
    assert missing == f"{bad}: line 3: field 'messages': missing (expected a list of chat messages)"


class CrashOnce(RolloutScorer):
    """Kills its own actor process (a real death, not an exception) on its first batch, once per marker file."""

    marker = ""

    def __call__(self, batch):
        if self.marker and not os.path.exists(self.marker):
            Path(self.marker).write_text(str(os.getpid()))
            os._exit(1)
        return super().__call__(batch)


def test_hash_survives_an_actor_killed_mid_run(capsys, tmp_path):
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    expected = serial_hash(capsys, str(EPISODES))

    class Crashing(CrashOnce):
        marker = str(tmp_path / "crashed")

    scored = score_dataset(read_rollouts(str(EPISODES)), RULES, batch_size=1, scorer=Crashing)
    assert dataset_hash(scored) == (expected, 6, [])
    assert (tmp_path / "crashed").exists(), "an actor died during the run"


TAU2 = DATA / "tau2_simulations"


@pytest.mark.skipif(not TAU2.is_dir(), reason=f"shared data not found at {TAU2}")
def test_hash_equals_serial_on_tau2_simulations(capsys):
    expected = serial_hash(capsys, str(TAU2))
    digest, episodes, errors = dataset_hash(score_dataset(read_rollouts(str(TAU2)), RULES))
    assert (digest, errors) == (expected, [])
    assert episodes > 300
