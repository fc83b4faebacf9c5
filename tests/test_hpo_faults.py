"""A search's bad settings, damaged state, interruptions and extensions: named errors, exit
code 2, nothing saved lost, and a longer search that continues as a straight one would."""

from __future__ import annotations

import json

import pytest
from helpers import StopAfter

from interplay.cli import main
from interplay.config.loading import load
from interplay.errors import ConfigError
from interplay.experiment.run_store.interrupt import Interrupted
from interplay.population.hpo import STATE_FILE, HPOError, search

TINY = ["algo.name=ippo", "env.id=spread", "env.num_envs=2", "algo.rollout=25",
        "algo.model.hidden=[16]", "hpo.population=2", "hpo.generations=2", "hpo.evo_steps=50",
        "train.test_episodes=2", "train.max_steps_per_episode=25",
        "hpo.init={lr: [1.0e-5, 1.0e-2]}", "log.console=false"]


def flags(settings: list[str]) -> list[str]:
    return [a for s in settings for a in ("-s", s)]


def rows(run_dir):
    return [json.loads(line) for line in (run_dir / "hpo.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("metric", ["episode_retrun_mean", "policy_return_mean/nobody"])
def test_a_misspelt_metric_is_refused_before_any_member_trains(tmp_path, capsys, metric):
    code = main(["hpo", "--run-dir", str(tmp_path / "s"), *flags([*TINY, f"hpo.metric={metric}"])])
    err = capsys.readouterr().err
    assert code == 2 and "hpo.metric" in err and "Traceback" not in err
    assert not (tmp_path / "s").exists()


def test_a_misspelt_metric_gets_the_nearest_name(tmp_path):
    with pytest.raises(ConfigError, match=r"hpo\.metric .*did you mean 'episode_return_mean'"):
        search(load([], [*TINY, "hpo.metric=episode_retrun_mean"]), tmp_path / "s")


@pytest.mark.parametrize(("extra", "message"), [
    (["hpo.evo_steps=49"], r"hpo\.evo_steps: 49 env steps is less than one ippo update .*50"),
    (["algo.name=dqn", "algo.learning_starts=500"], r"hpo\.evo_steps: .*learning_starts \(500\)"),
])
def test_generations_too_short_to_learn_are_refused(tmp_path, capsys, extra, message):
    settings = [s for s in TINY if not s.startswith("algo.rollout")] if "algo.name=dqn" in extra \
        else TINY
    with pytest.raises(ConfigError, match=message):
        search(load([], [*settings, *extra]), tmp_path / "s")
    assert main(["hpo", "--run-dir", str(tmp_path / "c"), *flags([*settings, *extra])]) == 2
    assert "hpo.evo_steps" in capsys.readouterr().err and not (tmp_path / "c").exists()


def test_hpo_refuses_a_folder_with_a_search_and_overwrite_starts_afresh(tmp_path, capsys):
    folder = tmp_path / "s"
    assert main(["hpo", "--run-dir", str(folder), *flags(TINY)]) == 0
    before = (folder / "hpo.jsonl").read_text()
    assert main(["hpo", "--run-dir", str(folder), *flags(TINY)]) == 2
    err = capsys.readouterr().err
    assert f"interplay hpo --resume {folder}" in err and "--overwrite" in err
    assert (folder / "hpo.jsonl").read_text() == before
    assert main(["hpo", "--run-dir", str(folder), "--overwrite",
                 *flags([*TINY, "hpo.generations=1"])]) == 0
    assert {r["generation"] for r in rows(folder)} == {0}


def test_a_folder_without_saved_state_is_named_with_what_to_do(tmp_path, capsys):
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "config.yaml").write_text("hpo: {population: 2}\n")
    assert main(["hpo", "--resume", str(folder)]) == 2
    assert f"no {STATE_FILE}" in capsys.readouterr().err


def test_a_stopped_search_says_to_resume_the_search_not_a_member(tmp_path):
    folder = tmp_path / "s"
    with pytest.raises(Interrupted) as caught:
        search(load([], TINY), folder, stop=StopAfter(40))  # in the second member
    told = str(caught.value)
    assert f"continue with: interplay hpo --resume {folder}" in told
    assert "members" not in told and "member m1" in told
    search(load([folder / "config.yaml"], []), folder, resume=True)


DAMAGE = {
    "truncated": lambda text: text[: len(text) // 2],
    "not json": lambda text: "\x00\x01garbage",
    "a list": lambda text: "[]",
    "wrong type": lambda text: text.replace('"generation": ', '"generation": "two", "x": ', 1),
    "member past the end": lambda text: text.replace('"next_member": 0', '"next_member": 9', 1),
    "member outside the folder": lambda text: text.replace('"id": "m', '"id": "../../m', 1),
    "bad rng": lambda text: json.dumps({**json.loads(text), "rng": {"state": 1}}),
}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hpo") / "s"
    search(load([], TINY), folder)
    return folder


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_state_file_is_named_and_left_as_it_is(finished, tmp_path, capsys, damage):
    import shutil

    folder = tmp_path / "s"
    shutil.copytree(finished, folder)
    state = folder / STATE_FILE
    state.write_text(DAMAGE[damage](state.read_text()))
    damaged = state.read_bytes()
    with pytest.raises(HPOError, match=STATE_FILE):
        search(load([folder / "config.yaml"], ["hpo.generations=3"]), folder, resume=True)
    assert main(["hpo", "--resume", str(folder), "-s", "hpo.generations=3"]) == 2
    assert STATE_FILE in capsys.readouterr().err
    assert state.read_bytes() == damaged and rows(folder) == rows(finished)


def test_a_member_folder_gone_is_named(finished, tmp_path):
    import shutil

    folder = tmp_path / "s"
    shutil.copytree(finished, folder)
    member = json.loads((folder / STATE_FILE).read_text())["members"][1]["id"]
    shutil.rmtree(folder / "members" / member)
    with pytest.raises(HPOError, match=f"member {member}"):
        search(load([folder / "config.yaml"], ["hpo.generations=3"]), folder, resume=True)


def test_more_generations_continue_as_a_straight_search(tmp_path):
    search(load([], [*TINY, "hpo.generations=4"]), tmp_path / "straight")
    search(load([], TINY), tmp_path / "extended")
    code = main(["hpo", "--resume", str(tmp_path / "extended"), "-s", "hpo.generations=4"])
    assert code == 0
    assert rows(tmp_path / "extended") == rows(tmp_path / "straight")
    assert load([tmp_path / "extended" / "config.yaml"]).hpo.generations == 4


def test_a_search_killed_in_its_first_member_resumes(tmp_path, monkeypatch):
    from interplay.population import hpo

    search(load([], TINY), tmp_path / "straight")
    calls = []
    real = hpo.finish_member

    def killed(exp, metric):  # dies as SIGKILL would: no save of its own
        calls.append(exp)
        raise SystemExit(137)

    monkeypatch.setattr(hpo, "finish_member", killed)
    with pytest.raises(SystemExit):
        search(load([], TINY), tmp_path / "killed")
    monkeypatch.setattr(hpo, "finish_member", real)
    assert (tmp_path / "killed" / STATE_FILE).is_file()
    search(load([tmp_path / "killed" / "config.yaml"], []), tmp_path / "killed", resume=True)
    assert rows(tmp_path / "killed") == rows(tmp_path / "straight")


def test_resuming_a_search_that_names_local_code_needs_trust(finished, tmp_path, capsys):
    import shutil

    folder = tmp_path / "s"
    shutil.copytree(finished, folder)
    member = sorted((folder / "members").iterdir())[0] / "config.yaml"
    member.write_text(member.read_text().replace("callbacks: []",
                                                 "callbacks:\n  - trusted_helpers:Quiet"))
    state = (folder / STATE_FILE).read_bytes()
    assert main(["hpo", "--resume", str(folder), "-s", "hpo.generations=3"]) == 2
    err = capsys.readouterr().err
    assert "trusted_helpers" in err and "--trust" in err
    assert (folder / STATE_FILE).read_bytes() == state


def test_a_training_run_given_to_hpo_resume_is_named(tmp_path, capsys):
    from interplay.experiment.loop import train

    train(load([], ["train.steps=10", "log.console=false", "log.tensorboard=false",
                    "log.curve=false"]), tmp_path / "run")
    assert main(["hpo", "--resume", str(tmp_path / "run")]) == 2
    assert f"interplay resume {tmp_path / 'run'}" in capsys.readouterr().err


@pytest.mark.parametrize("extra", [["hpo.init={rollout: [5, 100]}"],
                                   ["hpo.ranges={rollout: [5, 30]}"]])
def test_a_rollout_the_search_may_draw_longer_than_a_generation_is_refused(tmp_path, extra):
    with pytest.raises(ConfigError, match=r"hpo\.evo_steps: 50 env steps is less than one"):
        search(load([], [*TINY, *extra]), tmp_path / "s")


def test_maddpg_learning_starts_past_the_search_is_refused(tmp_path):
    settings = ["algo.name=maddpg", "env.id=spread", "algo.learning_starts=1000",
                "hpo.evo_steps=100", "hpo.generations=2", "log.console=false"]
    with pytest.raises(ConfigError, match=r"algo\.learning_starts \(1000\)"):
        search(load([], settings), tmp_path / "s")


def test_rows_written_again_or_cut_short_are_not_kept_twice(finished, tmp_path):
    import shutil

    folder = tmp_path / "s"
    shutil.copytree(finished, folder)
    log = folder / "hpo.jsonl"
    last = log.read_text().splitlines()[-1]
    again = json.loads(last) | {"generation": 2}  # rows of a generation the state never saved
    log.write_text(log.read_text() + json.dumps(again) + "\n" + last[: len(last) // 2])
    search(load([folder / "config.yaml"], ["hpo.generations=3"]), folder, resume=True)
    search(load([], [*TINY, "hpo.generations=3"]), tmp_path / "straight")
    assert rows(folder) == rows(tmp_path / "straight")


def test_a_damaged_row_in_the_middle_of_the_log_is_named(finished, tmp_path):
    import shutil

    folder = tmp_path / "s"
    shutil.copytree(finished, folder)
    log = folder / "hpo.jsonl"
    lines = log.read_text().splitlines()
    lines[1] = lines[1][:10]
    log.write_text("\n".join(lines) + "\n")
    damaged = log.read_bytes()
    with pytest.raises(HPOError, match=r"hpo\.jsonl, line 2"):
        search(load([folder / "config.yaml"], ["hpo.generations=3"]), folder, resume=True)
    assert log.read_bytes() == damaged


def test_a_member_whose_checkpoints_are_all_damaged_is_named(finished, tmp_path):
    import shutil

    folder = tmp_path / "s"
    shutil.copytree(finished, folder)
    member = json.loads((folder / STATE_FILE).read_text())["members"][0]["id"]
    for state in (folder / "members" / member / "checkpoints").glob("*/state.pt"):
        state.write_bytes(b"not a checkpoint")
    with pytest.raises(HPOError, match=f"member {member}: none of its checkpoints"):
        search(load([folder / "config.yaml"], ["hpo.generations=3"]), folder, resume=True)
