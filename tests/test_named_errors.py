"""Bad input that used to end in a traceback gets a named error and exit code 2, before any
work, with nothing already saved lost: extreme settings, configs too large for memory, an
empty ``--vs``, ``--out`` into no folder, config paths that are folders, tabs in YAML, and
observations of the wrong type given to a loaded policy."""

from __future__ import annotations

import typing

import numpy as np
import pytest

from interplay import load_policy
from interplay.cli import main
from interplay.config.algo import SETTINGS
from interplay.config.loading import load
from interplay.config.schema import SECTIONS
from interplay.data import ram
from interplay.data.ram import StorageSizeError
from interplay.errors import ConfigError
from interplay.experiment.loop import train
from interplay.experiment.policies import PolicyLoadError

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]
BOUNDED_ELSEWHERE = {"league.elo_k"}  # bounded with the rating update it feeds
ANY_FINITE = {"train.target": ["train.test_frequency=100"]}  # a return: any finite number


def _kind(field) -> type | None:
    for t in typing.get_args(field.annotation) or (field.annotation,):
        if t is bool:
            return None
        if t in (int, float):
            return t
    return None


def numeric_settings() -> list[tuple[list[str], str, type]]:
    found = []
    for section, model in SECTIONS.items():
        for key, field in model.model_fields.items():
            dotted = f"{section}.{key}"
            if _kind(field) and dotted not in BOUNDED_ELSEWHERE:
                found.append((ANY_FINITE.get(dotted, []), dotted, _kind(field)))
    for name, model in SETTINGS.items():
        for key, field in model.model_fields.items():
            if _kind(field):
                found.append(([f"algo.name={name}"], f"algo.{key}", _kind(field)))
    return found


@pytest.mark.parametrize(("base", "key", "kind"), numeric_settings(),
                         ids=lambda v: v if isinstance(v, str) else None)
def test_every_numeric_setting_refuses_extreme_values_by_name(base, key, kind):
    extremes = [10**30, -(10**30)] if kind is int else ["1e300", "-1e300", ".inf", "-.inf", ".nan"]
    if key in ANY_FINITE:
        extremes = [".inf", "-.inf", ".nan"]
    for value in extremes:
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            load([], [*base, f"{key}={value}"])


@pytest.mark.parametrize("value", ["[1.0e+300, 1.0e+301]", "[.nan, 0.1]", "[0.001, .inf]"])
def test_search_ranges_refuse_values_no_setting_takes(value):
    with pytest.raises(ConfigError, match=r"hpo\.init\.lr|hpo\.init"):
        from interplay.population.hpo import check_search

        check_search(load([], ["algo.name=ippo", f"hpo.init={{lr: {value}}}"]))


@pytest.fixture
def little_memory(monkeypatch):
    """A machine with 256 MiB free, whatever this one has."""
    monkeypatch.setattr(ram, "available_bytes", lambda: 256 * 2**20)


@pytest.mark.parametrize(("settings", "key"), [
    (["algo.name=ippo", "algo.model.hidden=[1000000000]"], "algo.model.hidden"),
    (["algo.name=dqn", "algo.model.hidden=[64, 100000, 100000]"], "algo.model.hidden"),
    (["algo.name=ippo", "policies.agent.model={hidden: [20000000]}"],
     "policies.agent.model.hidden"),
    (["algo.name=ippo", "algo.model.recurrent=gru", "algo.model.recurrent_size=100000"],
     "algo.model.recurrent_size"),
    (["algo.name=qmix", "algo.mixer_hidden=100000", "algo.hypernet_hidden=10000"],
     "algo.mixer_hidden"),
    (["algo.name=ippo", "env.num_envs=100000000"], "env.num_envs"),
    (["algo.name=dqn", "env.id=pettingzoo.classic.tictactoe_v3", "train.self_play=true",
      "env.num_envs=10000000"], "env.num_envs"),
])
def test_what_does_not_fit_in_memory_is_refused_with_the_bytes(tmp_path, capsys, little_memory,
                                                               settings, key):
    with pytest.raises(StorageSizeError, match=rf"{key}: .* needs .* bytes.* available"):
        train(load([], [*settings, "train.steps=10", *QUIET]), tmp_path / "a")
    args = [a for s in [*settings, "train.steps=10", *QUIET] for a in ("-s", s)]
    assert main(["train", *args, "--run-dir", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert key in err and "Traceback" not in err
    assert not (tmp_path / "b").exists()


def test_networks_and_copies_that_fit_are_built(tmp_path, little_memory):
    train(load([], ["algo.name=ippo", "env.num_envs=64", "algo.rollout=4", "train.steps=256",
                    "algo.model.hidden=[256, 256]", *QUIET]), tmp_path)
    assert (tmp_path / "metrics.jsonl").is_file()


# -- eval --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def duel_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("duel")
    train(load([], ["env.id=pettingzoo.classic.tictactoe_v3", "algo.name=dqn",
                    "train.self_play=true", "train.steps=20", "algo.learning_starts=10",
                    "algo.model.hidden=[8]", *QUIET]), run)
    return run


@pytest.mark.parametrize("opponent", ["", "  "])
def test_eval_vs_nothing_is_named(duel_run, capsys, opponent):
    assert main(["eval", str(duel_run), "--vs", opponent, "--episodes", "2"]) == 2
    err = capsys.readouterr().err
    assert "--vs" in err and "random" in err and "Traceback" not in err


@pytest.mark.parametrize("where", ["missing/eval.json", "a_file/eval.json", "."])
def test_eval_out_where_no_file_can_go_is_refused_before_the_eval(duel_run, tmp_path, capsys,
                                                                  where):
    (tmp_path / "a_file").write_text("mine\n")
    before = (duel_run / "eval.json").read_bytes() if (duel_run / "eval.json").exists() else None
    dest = tmp_path / where
    assert main(["eval", str(duel_run), "--episodes", "2", "--out", str(dest)]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and ".tmp" not in err and "Traceback" not in err
    assert (tmp_path / "a_file").read_text() == "mine\n"
    after = (duel_run / "eval.json").read_bytes() if (duel_run / "eval.json").exists() else None
    assert after == before


# -- config files ------------------------------------------------------------------------------
def test_a_config_path_that_is_a_folder_says_so(tmp_path, capsys):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.yaml").write_text("train: {steps: 10}\n")
    with pytest.raises(ConfigError, match="is a folder, not a YAML file.*config.yaml"):
        load([tmp_path / "run"])
    assert main(["config", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "is a folder" in err and "does not exist" not in err


@pytest.mark.parametrize("text", ["train:\n\tsteps: 10\n", "train:\n  steps:\t10\n  seed: 1\n",
                                  "train: {steps: 10}\n\t\n"])
def test_tabs_in_yaml_are_explained(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    try:
        cfg = load([path])
    except ConfigError as err:
        assert "tab" in str(err) and "spaces" in str(err) and "line 2" in str(err)
    else:  # YAML takes a tab where it is only whitespace between tokens
        assert cfg.train.steps == 10


def test_a_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"\xef\xbb\xbftrain:\n  steps: 10\n")
    assert load([path]).train.steps == 10


# -- load_policy -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def spread_policy(tmp_path_factory):
    run = tmp_path_factory.mktemp("spread")
    train(load([], ["env.id=spread", "algo.name=ippo", "algo.rollout=10", "train.steps=40",
                    "algo.model.hidden=[8]", *QUIET]), run)
    return load_policy(run)


@pytest.fixture(scope="module")
def board_policy(duel_run):
    return load_policy(duel_run)


BAD_OBSERVATIONS = [None, "hello", 5, 3.0, object(), b"xx", {"a": 1}, [None], [[1, 2]],
                    np.zeros(3), np.zeros((2, 2), dtype=object)]


@pytest.mark.parametrize("observation", BAD_OBSERVATIONS, ids=lambda o: type(o).__name__)
@pytest.mark.parametrize("which", ["spread_policy", "board_policy"])
def test_a_loaded_policy_names_an_observation_of_the_wrong_type(request, which, observation):
    policy = request.getfixturevalue(which)
    with pytest.raises(PolicyLoadError, match=f"policy {policy.id!r}: .*observation"):
        policy.act(observation)


@pytest.mark.parametrize("mask", ["x", [1, 2], np.ones(100), [None] * 9])
def test_a_loaded_policy_names_a_mask_that_does_not_fit(board_policy, mask):
    obs = board_policy.observation_space.sample()
    with pytest.raises(PolicyLoadError, match="mask"):
        board_policy.act(obs, mask=mask)
    with pytest.raises(PolicyLoadError, match="action_mask"):
        board_policy.act([{**obs, "action_mask": mask}])


def test_a_loaded_policy_still_acts_on_good_observations(spread_policy, board_policy):
    assert spread_policy.action_space.contains(
        spread_policy.act(spread_policy.observation_space.sample()))
    obs = board_policy.observation_space.sample()
    obs["action_mask"] = np.eye(9, dtype=np.int8)[4]
    assert board_policy.act(obs) == 4


def test_many_copies_of_a_slow_env_are_announced_before_they_are_built(monkeypatch):
    from interplay.experiment import build

    monkeypatch.setattr(build, "SLOW_BUILD_S", 0.0)
    cfg = load([], ["env.id=pettingzoo.classic.tictactoe_v3", "env.num_envs=64"])
    with pytest.warns(UserWarning, match=r"env\.num_envs: building 64 copies .* min"):
        env, _ = build.make_vec_env(cfg)
    env.close()


def test_a_config_path_that_is_a_broken_link_names_its_target(tmp_path):
    (tmp_path / "c.yaml").symlink_to(tmp_path / "gone.yaml")
    with pytest.raises(ConfigError, match="is a link to .*gone.yaml.*does not exist"):
        load([tmp_path / "c.yaml"])
