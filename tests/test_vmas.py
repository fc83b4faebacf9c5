"""VMAS scenarios as natively batched envs (``env.id: vmas:<scenario>``)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import read_metrics

from interplay.cli import main
from interplay.config.loading import load
from interplay.config.validation import validate
from interplay.envs.native.vmas_env import VmasRenderError
from interplay.envs.registry import EnvSpecError
from interplay.experiment.build import make_vec_env
from interplay.experiment.loop import resume, train

vmas = pytest.importorskip("vmas")

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]


def vmas_env(scenario: str = "navigation", num_envs: int = 3, **kwargs):
    cfg = validate({"env": {"id": f"vmas:{scenario}", "num_envs": num_envs,
                            "kwargs": {"n_agents": 2, **kwargs}}})
    env, copies = make_vec_env(cfg)
    assert copies is None  # natively batched: no per-copy envs
    return env


def random_actions(env, rng: np.random.Generator) -> dict[str, np.ndarray]:
    out = {}
    for a in env.agents:
        space = env.action_spaces[a]
        if env.continuous_actions:
            out[a] = rng.uniform(space.low, space.high, (env.num_envs, *space.shape)).astype(
                np.float32)
        else:
            out[a] = rng.integers(space.n, size=env.num_envs)
    return out


def test_observations_and_rewards_land_in_one_block_per_width():
    env = vmas_env(continuous_actions=False)
    step = env.reset(seed=0)
    assert env.agents == ["agent_0", "agent_1"]
    assert all(str(s) == "Discrete(9)" for s in env.action_spaces.values())
    block, slot = step.obs.place["agent_1"]
    assert block.shape == (3, 2, env.obs_views["agent_0"].dim) and slot == 1
    assert step.all_acting and step.all_legal and not step.flagged
    twin = vmas.make_env("navigation", num_envs=3, n_agents=2, continuous_actions=False,
                         seed=0)  # VMAS alone, stepped alike
    acts = random_actions(env, np.random.default_rng(0))
    step = env.step(acts)
    obs, rewards, *_ = twin.step([acts[a] for a in env.agents])
    for i, a in enumerate(env.agents):
        np.testing.assert_array_equal(step.obs[a], obs[i].numpy())
        np.testing.assert_array_equal(step.reward[:, i], rewards[i].numpy())
    assert step.reward.dtype == np.float64 and step.reward.shape == (3, 2)


def test_continuous_actions_take_the_box_bounds():
    env = vmas_env(continuous_actions=True)
    space = env.action_spaces["agent_0"]
    assert type(space).__name__ == "Box" and space.shape == (2,)
    env.reset(seed=1)
    step = env.step({a: np.tile(env.action_spaces[a].high, (3, 1)) for a in env.agents})
    assert np.isfinite(step.obs["agent_0"]).all()


def test_every_copy_ends_at_the_horizon_with_its_final_observation():
    env = vmas_env(max_steps=3, continuous_actions=False)
    twin = vmas.make_env("navigation", num_envs=3, n_agents=2, continuous_actions=False,
                         seed=4)
    env.reset(seed=4)
    rng = np.random.default_rng(0)
    for t in range(3):
        acts = random_actions(env, rng)
        step = env.step(acts)
        twin_obs, *_ = twin.step([acts[a] for a in env.agents])
        assert step.flagged == (t == 2)
    assert step.episode_end.all() and step.truncated.all() and not step.terminated.any()
    for i, a in enumerate(env.agents):  # the final observations are those VMAS gave
        np.testing.assert_allclose(step.final_obs[a], twin_obs[i].numpy(), rtol=1e-6)
        assert not np.allclose(step.obs[a], step.final_obs[a])  # already a new episode
    step = env.step(random_actions(env, rng))
    assert not step.flagged and not step.episode_end.any() and not step.truncated.any()


def test_one_copy_resets_alone():
    env = vmas_env(max_steps=5, continuous_actions=False)
    env.reset(seed=2)
    rng = np.random.default_rng(1)
    env.step(random_actions(env, rng))
    env._env.steps[1] = 4  # copy 1 reaches the horizon in the next step, the others do not
    step = env.step(random_actions(env, rng))
    assert step.episode_end.tolist() == [False, True, False]
    assert step.truncated[:, 0].tolist() == [False, True, False]
    assert env._env.steps.tolist() == [2, 0, 2]
    (obs,) = env._env.get_from_scenario(get_observations=True, get_rewards=False,
                                        get_infos=False, get_dones=False)
    for i, a in enumerate(env.agents):
        np.testing.assert_array_equal(step.obs[a], obs[i].numpy())
    assert not np.allclose(step.final_obs["agent_0"][1], step.obs["agent_0"][1])


def test_a_seed_fixes_the_episodes():
    def run(seed: int) -> list[np.ndarray]:
        env = vmas_env("balance", continuous_actions=True)
        seen = [env.reset(seed=seed).obs["agent_0"].copy()]
        rng = np.random.default_rng(0)
        for _ in range(3):
            step = env.step(random_actions(env, rng))
            seen += [step.obs["agent_0"].copy(), step.reward.copy()]
        return seen

    first, again, other = run(7), run(7), run(8)
    for x, y in zip(first, again, strict=True):
        np.testing.assert_array_equal(x, y)
    assert not np.allclose(first[0], other[0])


def test_the_run_horizon_and_the_scenario_horizon_the_shorter_wins():
    cfg = validate({"env": {"id": "vmas:navigation", "num_envs": 2,
                            "kwargs": {"n_agents": 2, "max_steps": 30}},
                    "train": {"max_steps_per_episode": 12}})
    env, _ = make_vec_env(cfg)
    assert env._env.max_steps == 12
    assert vmas_env()._env.max_steps == 100  # neither says: 100, as BenchMARL's tasks


@pytest.mark.parametrize(("kwargs", "needles"), [
    ({"n_agentz": 2}, ["env.kwargs.n_agentz", "not used by VMAS scenario 'navigation'"]),
    ({"device": "cpu"}, ["env.kwargs.device", "train.device"]),
    ({"dict_spaces": True}, ["env.kwargs.dict_spaces"]),
    ({"max_steps": 0}, ["env.kwargs.max_steps", "got 0"]),
    # VMAS's own check (an assert), named with the settings given
    ({"multidiscrete_actions": True}, ["multidiscrete_actions=True", "continuous_actions=False"]),
])
def test_kwargs_it_cannot_take_are_named(kwargs, needles):
    with pytest.raises(EnvSpecError) as err:
        vmas_env(**kwargs)
    for needle in needles:
        assert needle in str(err.value)


def test_an_unknown_scenario_lists_the_scenarios(capsys, tmp_path, monkeypatch):
    with pytest.raises(EnvSpecError, match=r"did you mean vmas:navigation\?.*balance.*transport"):
        vmas_env("navigatoin")
    monkeypatch.chdir(tmp_path)
    assert main(["train", "-s", "env.id=vmas:no_such_task", *[f"-s={q}" for q in QUIET]]) == 2
    err = capsys.readouterr().err
    assert "no scenario 'no_such_task'" in err and "Traceback" not in err
    assert not any((tmp_path / "runs").iterdir())  # the run that never started left no folder


def test_check_steps_a_scenario(capsys):
    assert main(["check", "vmas:balance", "--cycles", "8", "-s", "env.kwargs.max_steps=5"]) == 0
    assert "ok    vmas:balance" in capsys.readouterr().out


@pytest.mark.parametrize("extra", [
    ["env.id=vmas:navigation", "algo.name=ippo", "env.kwargs.continuous_actions=true"],
    ["env.id=vmas:balance", "algo.name=mappo", "env.kwargs.continuous_actions=false"],
])
def test_a_short_run_trains_and_resumes_with_fresh_episodes(tmp_path, extra):
    common = [*extra, "env.num_envs=4", "env.kwargs.max_steps=10", "env.kwargs.n_agents=2",
              "algo.rollout=10", "log.every=40", *QUIET]
    train(load([], [*common, "train.steps=80"]), tmp_path)
    rows = read_metrics(tmp_path)
    assert rows[-1]["env_steps"] == 80 and rows[-1]["episodes"] == 8
    assert np.isfinite(rows[-1]["episode_return_mean"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resumed = resume(tmp_path, ["train.steps=120"])
    assert resumed.env_steps == 120
    said = " ".join(str(w.message) for w in caught)
    assert "fresh episodes" in said and "VMAS cannot read or set the state" in said


def test_frames_of_one_copy_and_a_named_error_when_drawing_fails(monkeypatch):
    env = vmas_env(max_steps=2, num_envs=2, continuous_actions=False)
    frames = env.record_frames(1)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(2):
        env.step(random_actions(env, rng))
    assert [k for k, _ in frames] == ["start", "step", "step", "start"]
    assert frames[0][1].ndim == 3 and frames[0][1].dtype == np.uint8
    env.close()

    def no_display(*args, **kwargs):
        raise RuntimeError("no display")

    monkeypatch.setattr(env._env, "render", no_display)
    with pytest.raises(VmasRenderError, match="copy 1 .*pyglet"):
        env.render_rgb(1)


def test_each_env_draws_from_its_own_streams():
    """Seeding one VMAS env (a test phase's) leaves another's resets as they were."""
    def resets(seed_other: bool) -> np.ndarray:
        env = vmas_env(max_steps=1, continuous_actions=False)
        other = vmas_env(continuous_actions=False)
        env.reset(seed=3)
        if seed_other:
            other.reset(seed=99)
        return env.step(random_actions(env, np.random.default_rng(0))).obs["agent_0"].copy()

    np.testing.assert_array_equal(resets(False), resets(True))
