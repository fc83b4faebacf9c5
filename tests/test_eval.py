"""``interplay eval``: scores, the --env check, and GIFs of built-in and PettingZoo envs."""

from __future__ import annotations

import json

import imageio.v3 as iio
import numpy as np
import pytest
from gymnasium import spaces

from interplay.config.loading import load
from interplay.envs.toy import ShiftingCrowd
from interplay.errors import ConfigError
from interplay.experiment.evaluate import RenderError, evaluate
from interplay.experiment.loop import train

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]


class WideCrowd(ShiftingCrowd):
    """ShiftingCrowd's agents with a wider observation space."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._obs_space = spaces.Box(-1e6, 1e6, (3,), np.float32)

    def _obs(self, agent):
        return np.zeros(3, np.float32)


def wide_crowd(**kwargs):
    return WideCrowd(**kwargs)


def other_crowd(**kwargs):
    return ShiftingCrowd(schedule={"b_0": (0, 100)}, **kwargs)


@pytest.fixture(scope="module")
def crowd_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("crowd")
    train(load([], ["env.id=interplay.envs.toy:shifting_crowd", "train.steps=40", *QUIET]), run)
    return run


@pytest.mark.parametrize(("env_id", "message"), [
    (f"{__name__}:other_crowd",
     r"env '[\w.]+:other_crowd' has agents \['b_0'\], but the policies were made for "
     r"\['a_0', 'a_1', 'a_2', 'a_3'\]"),
    (f"{__name__}:wide_crowd",
     r"env '[\w.]+:wide_crowd': agent 'a_0' has observation space Box\(-1e\+06, 1e\+06, "
     r"\(3,\), float32\) and action space Discrete\(2\), but the policies were made for "
     r"Box\(-1e\+06, 1e\+06, \(2,\), float32\) and Discrete\(2\)"),
])
def test_an_env_with_other_spaces_names_what_it_has_and_what_the_policies_need(
        crowd_run, env_id, message):
    before = sorted(p.name for p in crowd_run.rglob("*"))
    with pytest.raises(ConfigError, match=message):
        evaluate(crowd_run, env_id=env_id, episodes=1)
    assert sorted(p.name for p in crowd_run.rglob("*")) == before  # nothing written or lost


def test_eval_writes_the_scores(crowd_run):
    report = evaluate(crowd_run, episodes=2)
    saved = json.loads((crowd_run / "eval.json").read_text())
    assert saved == report and report["episodes"] == 2


class PaintedCrowd(ShiftingCrowd):
    """ShiftingCrowd drawn as a grey square whose shade is the step count."""

    def __init__(self, render_mode=None, **kwargs):
        super().__init__(**kwargs)
        self.render_mode = render_mode

    def render(self):
        return np.full((8, 8, 3), 20 * self.t, np.uint8) if self.render_mode == "rgb_array" else None


def painted_crowd(**kwargs):
    return PaintedCrowd(**kwargs)


def gif_frames(path):
    from PIL import Image

    frames = iio.imread(path, index=None)
    with Image.open(path) as im:
        durations = []
        for i in range(im.n_frames):
            im.seek(i)
            durations.append(im.info["duration"])
    return frames, durations


def test_a_pettingzoo_env_run_in_workers_is_drawn_in_process_up_to_its_last_step(tmp_path):
    run = tmp_path / "run"
    train(load([], [f"env.id={__name__}:painted_crowd", "train.steps=30", *QUIET]), run)
    report = evaluate(run, episodes=2, render=tmp_path / "out.gif",
                      overrides=["env.vectorization=async", "env.num_workers=1"])
    frames, durations = gif_frames(tmp_path / "out.gif")
    # One episode of 10 steps, from its start (shade 0) to its final step (shade 200).
    assert frames[:, 0, 0, 0].tolist() == [20 * t for t in range(11)]
    assert durations == [100] * 10 + [1000]  # the last frame is kept, and held
    assert report["render"] == str(tmp_path / "out.gif")
    assert json.loads((run / "eval.json").read_text())["render"] == report["render"]


@pytest.mark.parametrize("task", ["spread", "speaker_listener"])
def test_a_built_in_env_draws_itself(tmp_path, task):
    run = tmp_path / "run"
    train(load([], [f"env.id={task}", "train.steps=50", *QUIET]), run)
    report = evaluate(run, episodes=1, render=tmp_path / "out.gif")
    frames, durations = gif_frames(tmp_path / "out.gif")
    assert frames.shape[1:] == (320, 320, 3) and len(np.unique(frames[-1].reshape(-1, 3), axis=0)) > 2
    assert sum(durations) == 25 * 100 + 1000 and durations[-1] == 1000  # 26 frames, none lost
    assert report["episodes"] == 1 and "render_error" not in report


def test_a_built_in_env_keeps_the_frame_of_each_episodes_last_step():
    from interplay.envs.native import Spread

    env, twin = Spread(num_envs=2, max_cycles=5), Spread(num_envs=2, max_cycles=6)
    frames = env.record_frames(1)
    env.reset(3)
    twin.reset(3)
    rng = np.random.default_rng(0)
    for _ in range(5):
        actions = {a: rng.integers(5, size=2) for a in env.agents}
        env.step(actions)
        twin.step(actions)
    assert [k for k, _ in frames] == ["start"] + ["step"] * 5 + ["start"]
    assert np.array_equal(frames[5][1], twin.render_rgb(1))  # the state the episode ended in
    assert not np.array_equal(frames[6][1], frames[5][1])  # then the next episode's start


def test_when_drawing_fails_the_scores_are_still_written(crowd_run, tmp_path):
    with pytest.raises(RenderError, match=r"--render .*out.gif: (TypeError|EnvSpecError): .*render_mode.*"
                                          r"the scores were written to .*eval.json"):
        evaluate(crowd_run, episodes=2, render=tmp_path / "out.gif")
    saved = json.loads((crowd_run / "eval.json").read_text())
    assert saved["episodes"] == 2 and "render_mode" in saved["render_error"]
    assert not (tmp_path / "out.gif").exists()
