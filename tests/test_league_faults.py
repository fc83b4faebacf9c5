"""Leagues under faults: crashes after evictions, changed pools, damaged files, bad settings."""

from __future__ import annotations

import json
import re
import shutil
import warnings

import numpy as np
import pytest
import torch
from helpers import TIMING, read_metrics

from interplay.cli import main
from interplay.config.loading import load
from interplay.errors import ConfigError, ScriptedPolicyError, WriteError
from interplay.experiment.evaluate import evaluate
from interplay.experiment.loop import Experiment, resume, train
from interplay.experiment.run_store.checkpoint import list_checkpoints, load_checkpoint
from interplay.population.league.pool import League, LeagueWarning, league_of
from interplay.population.league.report import league_report
from interplay.population.ratings import Elo

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]
TTT = ["algo.name=dqn", "env.id=pettingzoo.classic.tictactoe_v3", "train.self_play=true",
       "env.num_envs=4", "algo.learning_starts=100", "algo.batch_size=16",
       "algo.model.hidden=[16]", "train.test_frequency=-1", *QUIET]
LEAGUE = [*TTT, "league.snapshot_every=200", "league.max_snapshots=2", "league.fixed=[random]",
          "log.every=200"]


def pool_files(checkpoint) -> set[str]:
    """The snapshot files a checkpoint's league names."""
    state, _ = load_checkpoint(checkpoint)
    league = next(c["state"] for c in state["callbacks"]["callbacks"]
                  if c["class"].endswith("League"))
    return {m["file"] for m in league["members"] if m["file"]}


def league_lines(run) -> list[str]:
    return (run / "league.jsonl").read_text().splitlines()


def rows(run) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING} for r in read_metrics(run)]


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    run = tmp_path_factory.mktemp("straight") / "run"
    train(load([], [*LEAGUE, "checkpoint.every=400", "train.steps=1000"]), run)
    return run


@pytest.mark.parametrize("killed_at", [
    500,
    # Later stops, after more snapshots have come and gone: the same resume, longer runs.
    pytest.param(700, marks=pytest.mark.slow),
    pytest.param(1000, marks=pytest.mark.slow),
])
def test_a_league_stopped_without_a_last_checkpoint_resumes_as_a_straight_run(
        straight, tmp_path, killed_at):
    # A crash after the checkpoints at 400, 800: no checkpoint at the end. A snapshot is
    # taken every 200 steps and two are kept, so the newest checkpoint names snapshots that
    # left the pool after it (snapshot_200 at 600, snapshot_600 at 1000).
    run = tmp_path / "run"
    train(load([], [*LEAGUE, "checkpoint.every=400", "checkpoint.at_end=false",
                    f"train.steps={killed_at}"]), run)
    for path in list_checkpoints(run):  # every checkpoint's pool is on disk
        assert all((run / "league" / f).is_file() for f in pool_files(path)), path
    resume(run, ["train.steps=1000", "checkpoint.at_end=true"])
    assert league_lines(run) == league_lines(straight)
    assert rows(run) == rows(straight)


def test_a_league_resumes_from_an_older_checkpoint_too(straight, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(straight, run)
    resume(run, [], checkpoint=list_checkpoints(run)[0])  # 400: league.jsonl is cut back
    assert league_lines(run) == league_lines(straight)


def test_files_of_snapshots_out_of_the_pool_go_once_no_checkpoint_names_them(straight):
    on_disk = {p.name for p in (straight / "league").glob("*.pt")}
    named = set().union(*map(pool_files, list_checkpoints(straight)))  # 400, 800, 1000
    assert on_disk == named and "snapshot_200.pt" in named
    assert not list((straight / "league").glob("*.tmp"))


def _experiment(tmp_path, *extra):
    return Experiment(load([], [*LEAGUE, *extra]), tmp_path / "run")


def test_a_snapshot_leaving_the_pool_plays_out_its_games_and_no_other_game_changes_member(
        tmp_path):
    exp = _experiment(tmp_path, "league.fixed=[]")
    lg = league_of(exp)
    assert isinstance(lg, League)
    lg.snapshot(0)
    lg.snapshot(1)
    lg.assign[:] = [0, 1, 1, 0]  # copies 0 and 3 play snapshot_0, the oldest
    lg.snapshot(2)  # snapshot_0 leaves the pool
    names = [lg.members[i].name for i in lg.assign]
    assert names == ["snapshot_0", "snapshot_1", "snapshot_1", "snapshot_0"]
    assert [lg.members[i].name for i in lg._pool()] == ["snapshot_1", "snapshot_2"]
    for env in (0, 3):  # its games end: new ones are drawn from the pool
        lg.on_episode_start(episode=None, env_index=env, runner=exp.runner)
    assert [m.name for m in lg.members] == ["snapshot_1", "snapshot_2"]
    assert [lg.members[i].name for i in lg.assign[1:3]] == ["snapshot_1", "snapshot_1"]
    assert lg.pending == [{"file": "snapshot_0.pt", "from": 0, "to": 0}]
    exp.close()


def test_a_full_disk_while_writing_a_snapshot_is_named_and_leaves_no_temporary_file(
        tmp_path, monkeypatch):
    (tmp_path / "run" / "league").mkdir(parents=True)
    (tmp_path / "run" / "league" / "snapshot_5.tmp").write_bytes(b"a write that was killed")
    exp = _experiment(tmp_path)
    assert not (tmp_path / "run" / "league" / "snapshot_5.tmp").exists()
    lg = league_of(exp)
    assert isinstance(lg, League)

    def full(obj, f, *args, **kwargs):
        f.write(b"partial")
        raise RuntimeError("[enforce fail at inline_container.cc:595] . unexpected pos 64")

    monkeypatch.setattr(torch, "save", full)
    with pytest.raises(WriteError, match=r"cannot write .*snapshot_0\.pt: .*unexpected pos"):
        lg.snapshot(0)
    assert list((tmp_path / "run" / "league").iterdir()) == []
    exp.close()


@pytest.fixture(scope="module")
def league_run(tmp_path_factory):
    """A short league run, and a snapshot file of it copied into a run folder of its own."""
    base = tmp_path_factory.mktemp("league")
    run = base / "run"
    train(load([], [*LEAGUE, "checkpoint.every=200", "train.steps=500"]), run)
    other = base / "other"
    (other / "league").mkdir(parents=True)
    shutil.copy(run / "config.yaml", other / "config.yaml")
    shutil.copy(run / "league" / "snapshot_400.pt", other / "league" / "snapshot_400.pt")
    return run, other / "league" / "snapshot_400.pt"


def first_legal(observation, agent_id):
    return int(np.flatnonzero(observation["action_mask"])[0])


def _members(run) -> dict[str, dict]:
    return {m["name"]: m for m in json.loads(league_lines(run)[-1])["members"]}


@pytest.mark.parametrize("change", ["removed", "scripted", "frozen"])
def test_a_resume_with_a_changed_league_fixed_drops_or_adds_members(league_run, tmp_path,
                                                                      change):
    source, snapshot = league_run
    run = tmp_path / "run"
    shutil.copytree(source, run)
    fixed = {"removed": "[]", "scripted": f"[random, '{__name__}:first_legal']",
             "frozen": f"[random, '{snapshot}']"}[change]
    with pytest.warns(LeagueWarning, match="league.fixed changed since the checkpoint"):
        resume(run, ["train.steps=900", f"league.fixed={fixed}"])
    members = _members(run)
    ratings = json.loads(league_lines(run)[-1])["ratings"]
    if change == "removed":
        assert "random" not in members and "random" in ratings  # its rating stays on record
    else:
        added = f"{__name__}:first_legal" if change == "scripted" else str(snapshot)
        assert members[added]["games"] > 0, members


def test_train_overwrite_leaves_nothing_of_the_old_league(league_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(league_run[0], run)
    train(load([], [*TTT, "train.steps=100"]), run, overwrite=True)
    assert not (run / "league").exists() and not (run / "league.jsonl").exists()
    assert main(["eval", str(run), "--vs", "snapshot_400", "--episodes", "2"]) == 2


def test_eval_plays_without_the_league_members(league_run, tmp_path):
    source, snapshot = league_run
    run = tmp_path / "run"
    train(load([], [*LEAGUE, f"league.fixed=['{snapshot}']", "train.steps=300"]), run)
    gone = tmp_path / "gone"
    shutil.move(snapshot.parent.parent, gone)
    try:
        report = evaluate(run, episodes=4, out=tmp_path / "e.json")
        assert report["episodes"] == 4
    finally:
        shutil.move(gone, snapshot.parent.parent)


def illegal_move(observation, agent_id):
    """A scripted member that plays an occupied square whenever there is one."""
    taken = np.flatnonzero(observation["action_mask"] == 0)
    return int(taken[0]) if len(taken) else 0


def test_an_illegal_move_by_a_scripted_member_or_vs_opponent_is_named(league_run, tmp_path):
    message = (rf"scripted policy '{__name__}:illegal_move' chose action \d for agent "
               r"'player_\d', which the env's action mask marks illegal")
    with pytest.raises(ScriptedPolicyError, match=message):
        train(load([], [*LEAGUE, f"league.fixed=['{__name__}:illegal_move']",
                        "train.steps=300"]), tmp_path / "run")
    with pytest.raises(ScriptedPolicyError, match=message):
        evaluate(league_run[0], vs=f"{__name__}:illegal_move", episodes=4,
                 out=tmp_path / "e.json")


@pytest.mark.parametrize(("extra", "message"), [
    (["league.fixed=[random]"], r"league\.fixed set, but league\.snapshot_every is 0"),
    (["league.elo_k=32", "league.rating=openskill"],
     r"league\.rating, league\.elo_k set, but league\.snapshot_every is 0"),
    (["league.snapshot_every=100", "league.fixed=[random, random]"],
     "lists the member 'random' twice"),
    (["league.snapshot_every=100", "league.fixed=[/some/run, /some//run/]"],
     r"lists the member '/some/run' twice \(also as '/some//run/'\)"),
    (["league.snapshot_every=100", "league.fixed=['']"], "league.fixed has an empty entry"),
    (["league.snapshot_every=100", "league.elo_k=1e300"], r"league\.elo_k"),
    (["league.against_self=0.3"], r"league\.against_self set, but league\.snapshot_every is 0"),
    (["league.snapshot_every=100", "league.against_self=1"], r"league\.against_self"),
    (["league.snapshot_every=100", "league.against_self=-0.1"], r"league\.against_self"),
    (["league.snapshot_every=100", "league.pfsp_sides=true", "league.opponent_sampling=uniform"],
     r"league\.pfsp_sides weights the sides by pfsp, but league\.opponent_sampling is 'uniform'"),
])
def test_league_settings_that_would_be_ignored_or_blow_up_are_refused(extra, message):
    with pytest.raises(ConfigError, match=message):
        load([], [*TTT, *extra])


def test_elo_keeps_far_apart_ratings_finite():
    elo = Elo(400.0)
    a, b = elo.update([1e7], [-1e7], 0.0)
    assert np.isfinite(a[0]) and np.isfinite(b[0]) and a[0] == pytest.approx(1e7 - 400.0)


def test_a_damaged_line_of_league_jsonl_is_skipped_and_named(league_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(league_run[0], run)
    lines = league_lines(run)
    bad_sides = json.loads(lines[-1])
    bad_sides["members"][0]["by_side"] = [[1, 2, "x"], [0, 0, 0]]
    damaged = [lines[0], '{"env_steps": 400, "ratings": [1', *lines[1:], json.dumps(bad_sides),
               lines[-1][:25]]
    (run / "league.jsonl").write_text("\n".join(damaged))
    with pytest.warns(LeagueWarning, match=r"line 2 is damaged") as caught:
        table = league_report(run)
    assert any(f"line {len(damaged) - 1} is damaged" in str(w.message) for w in caught)
    assert any(f"line {len(damaged)} is damaged" in str(w.message) for w in caught)
    assert table[0]["member"] and (run / "ratings.png").is_file()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["league", str(run)]) == 0
    (run / "league.jsonl").write_text("garbage\n")
    assert main(["league", str(run)]) == 2
    assert "no readable line" in capsys.readouterr().err


def test_a_marker_module_in_league_fixed_is_imported_by_no_command_without_trust(
        tmp_path, monkeypatch, capsys):
    import sys

    marker = tmp_path / "imported"
    (tmp_path / "league_marker.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).touch()\n"
        "import numpy as np\n"
        "def play(observation, agent_id):\n"
        "    return int(np.flatnonzero(observation['action_mask'])[0])\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    run = tmp_path / "run"
    train(load([], [*LEAGUE, "league.fixed=['league_marker:play']", "train.steps=300"]), run)
    assert marker.exists()  # the user's own training imports it
    for command in (["resume", str(run), "-s", "train.steps=600"], ["eval", str(run)],
                    ["eval", str(run), "--vs", "random"]):
        marker.unlink(missing_ok=True)
        sys.modules.pop("league_marker", None)
        assert main(command) == 2, command
        assert "league_marker" in capsys.readouterr().err
        assert not marker.exists(), command


def test_a_league_on_a_cooperative_env_is_told_so(tmp_path):
    common = ["algo.name=ippo", "algo.rollout=25", "env.num_envs=5", "train.self_play=true",
              "league.snapshot_every=1000", "train.test_frequency=-1", *QUIET]
    # simple_spread pays every agent the team's reward, plus a little for its own collisions
    cfg = load([], [*common, "env.id=mpe2.simple_spread_v3", "env.kwargs={N: 2, max_cycles: 5}",
                    "train.steps=300"])
    with pytest.warns(LeagueWarning, match="the sides' returns went up and down together"):
        train(cfg, tmp_path / "spread")
    with warnings.catch_warnings():
        warnings.simplefilter("error", LeagueWarning)
        train(load([], [*common, "env.id=pettingzoo.classic.tictactoe_v3", "train.steps=500"]),
              tmp_path / "ttt")


@pytest.mark.slow  # a real SIGKILL of a CLI run; the quick suite stops a league in process
def test_a_league_killed_with_sigkill_after_an_eviction_resumes_as_a_straight_run(
        straight, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    run = tmp_path / "run"
    sets = [a for s in [*LEAGUE, "checkpoint.every=400", "train.steps=1000"] for a in ("-s", s)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).parent.parent / "src"), os.environ.get("PYTHONPATH", "")])}
    cli = "import sys; from interplay.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.Popen([sys.executable, "-c", cli, "train", *sets, "--run-dir", str(run)],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        # After snapshot_200 left the pool (at 600), before the run ends.
        while not (run / "league" / "snapshot_600.pt").exists() and proc.poll() is None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the run ended before it was killed"
    assert list_checkpoints(run)  # the one at 400
    assert main(["resume", str(run), "--trust"]) == 0
    assert league_lines(run) == league_lines(straight)
    assert rows(run) == rows(straight)


@pytest.mark.parametrize(("change", "message"), [
    ("league.rating=openskill", r"league\.rating: the checkpoint's league rates with elo"),
    ("league.sides=[[player_2], [player_1]]", r"league\.sides: the checkpoint.s league put"),
    ("league.snapshot_every=0", r"league\.\w+ set, but league\.snapshot_every is 0"),
])
def test_a_resume_that_cannot_go_on_with_the_league_is_refused_by_name(league_run, tmp_path,
                                                                       capsys, change, message):
    run = tmp_path / "run"
    shutil.copytree(league_run[0], run)
    before = {p.name: p.read_bytes() for p in (run / "league").iterdir()}
    lines = league_lines(run)
    assert main(["resume", str(run), "-s", change, "-s", "train.steps=700"]) == 2
    assert re.search(message, capsys.readouterr().err)
    assert {p.name: p.read_bytes() for p in (run / "league").iterdir()} == before
    assert league_lines(run) == lines


def test_a_resume_with_fewer_snapshots_allowed_retires_the_oldest(league_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(league_run[0], run)
    resume(run, ["league.max_snapshots=1", "train.steps=560"])  # no snapshot taken since
    snaps = [m["name"] for m in _members(run).values() if m["kind"] == "snapshot"]
    assert snaps == ["snapshot_400"]


def test_a_damaged_snapshot_named_by_the_checkpoint_stops_a_resume_by_name(league_run, tmp_path,
                                                                           capsys):
    run = tmp_path / "run"
    shutil.copytree(league_run[0], run)
    (run / "league" / "snapshot_400.pt").write_bytes(b"cut short")
    lines = league_lines(run)
    assert main(["resume", str(run), "-s", "train.steps=700"]) == 2
    assert "snapshot_400.pt is not a readable league snapshot" in capsys.readouterr().err
    assert league_lines(run) == lines and (run / "league" / "snapshot_200.pt").is_file()


def test_a_resume_ends_a_line_the_crash_cut_so_the_next_ones_stay_whole(league_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(league_run[0], run)
    lines = league_lines(run)
    # The checkpoint (at 500) saw two lines written; the disk kept only part of the second.
    (run / "league.jsonl").write_text(lines[0] + "\n" + lines[1][:30])
    resume(run, ["train.steps=700"])
    with pytest.warns(LeagueWarning, match="line 2 is damaged"):
        table = league_report(run)
    assert table and json.loads(league_lines(run)[-1])["env_steps"] == 700
