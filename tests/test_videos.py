"""``train.render_every``: videos of greedy episodes while a run trains."""

from __future__ import annotations

import imageio.v3 as imageio
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from interplay import register_env
from interplay.config.loading import load
from interplay.envs.toy import ShiftingCrowd
from interplay.experiment.loop import train

QUIET = ["log.console=false", "log.curve=false"]


def _tensorboard_videos(run_dir) -> list[int]:
    acc = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"images": 0})
    acc.Reload()
    return [event.step for event in acc.Images("video/test")] if "video/test" in acc.Tags()["images"] else []


@pytest.mark.parametrize("extra", [
    ["env.id=spread", "env.kwargs.max_cycles=5"],  # built-in: it draws itself
    ["env.id=mpe2.simple_spread_v3", "env.kwargs.max_cycles=5"],  # PettingZoo, rgb_array
    ["env.id=mpe2.simple_spread_v3", "env.kwargs.max_cycles=5", "env.vectorization=async",
     "env.num_workers=1"],  # copies in workers: the video is drawn in this process
], ids=["builtin", "pettingzoo", "async"])
def test_videos_are_written_and_logged_while_training(tmp_path, extra):
    run = tmp_path / "run"
    train(load([], [*extra, "env.num_envs=2", "train.steps=40", "train.render_every=20",
                    *QUIET]), run)
    videos = sorted((run / "videos").iterdir())
    assert [v.name for v in videos] == ["step_20.gif", "step_40.gif"]
    frames = imageio.imread(videos[0], index=None)
    assert frames.ndim == 4 and frames.shape[0] >= 5  # the episode's start, steps and end
    assert _tensorboard_videos(run) == [20, 40]


def test_an_env_that_cannot_be_drawn_is_reported_once_and_training_goes_on(tmp_path):
    register_env("crowd_video", ShiftingCrowd)
    run = tmp_path / "run"
    with pytest.warns(UserWarning, match="train.render_every: no video at env step 10") as seen:
        result = train(load([], ["env.id=crowd_video", "train.steps=40", "train.render_every=10",
                                 *QUIET]), run)
    assert len([w for w in seen if "render_every" in str(w.message)]) == 1
    assert result.env_steps == 40
    assert not list((run / "videos").glob("*")) if (run / "videos").exists() else True


def test_no_videos_by_default(tmp_path):
    run = tmp_path / "run"
    train(load([], ["env.id=spread", "train.steps=20", *QUIET]), run)
    assert not (run / "videos").exists()


@pytest.mark.slow
def test_a_ray_run_writes_videos_from_this_process(tmp_path):
    pytest.importorskip("ray")
    from interplay.backends.ray.cluster import connect, disconnect
    from interplay.config.schema import BackendConfig

    started = connect(BackendConfig(name="ray"), num_cpus=2)
    try:
        run = tmp_path / "run"
        train(load([], ["env.id=spread", "env.kwargs.max_cycles=5", "env.num_envs=2",
                        "algo.name=ippo", "algo.rollout=10", "train.steps=40",
                        "train.render_every=20", "train.device=cpu", "backend.name=ray",
                        "backend.num_env_runners=1", *QUIET]), run)
    finally:
        disconnect(started)
    assert sorted(v.name for v in (run / "videos").iterdir()) == ["step_20.gif", "step_40.gif"]
    assert _tensorboard_videos(run) == [20, 40]


def test_wandb_gets_each_video_at_its_env_step(tmp_path, monkeypatch):
    import sys
    import types

    logged = []

    class FakeRun:
        def define_metric(self, name, **kwargs):
            pass

        def log(self, data):
            logged.append(data)

        def finish(self):
            pass

    class Video:
        def __init__(self, data, **kwargs):
            self.data = data

    fake = types.SimpleNamespace(init=lambda **kw: FakeRun(), Video=Video)
    monkeypatch.setitem(sys.modules, "wandb", fake)
    run = tmp_path / "run"
    train(load([], ["env.id=spread", "env.kwargs.max_cycles=5", "train.steps=20",
                    "train.render_every=10", "log.wandb=true", *QUIET]), run)
    videos = [d for d in logged if "video/test" in d]
    assert [d["env_steps"] for d in videos] == [10, 20]
    assert videos[0]["video/test"].data == str(run / "videos" / "step_10.gif")
