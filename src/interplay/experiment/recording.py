"""Greedy episodes of a run's policies drawn as frames, for ``eval --render`` and the videos a
run writes while it trains (``train.render_every``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from interplay.config.schema import Config
from interplay.envs.registry import native_env_class
from interplay.errors import ConfigError
from interplay.experiment.build import env_maker, make_vec_env
from interplay.run.runner import Runner
from interplay.seeding import derived_seed


def record_episodes(cfg: Config, exp: Any, env_id: Any, episodes: int = 1,
                    seed: int | None = None) -> tuple[np.ndarray, list[float]]:
    """The frames ``[T, H, W, 3]`` of ``episodes`` greedy episodes of ``exp``'s policies on one
    in-process copy, and how long each is shown (ms).

    A built-in batched env draws itself (``render_rgb``); any other is built with
    ``render_mode="rgb_array"``, in this process even when the run steps its copies in
    workers or on Ray. Each episode's last frame is drawn before the copy resets and held for
    a second.
    """
    sync = {"vectorization": "sync"}
    if native_env_class(env_id) is not None:
        render_cfg = cfg.model_copy(update={"env": cfg.env.model_copy(update=sync)})
        env, copies = make_vec_env(render_cfg, num_envs=1, env_id=env_id, keep_state=False)
        frames = env.record_frames(0)  # type: ignore[attr-defined]  # a NativeEnv
    else:
        make = env_maker(env_id, cfg, render_mode="rgb_array")
        frames = []
        render_cfg = cfg.model_copy(update={"env": cfg.env.model_copy(update={**sync, "kwargs": {}})})
        env, copies = make_vec_env(render_cfg, num_envs=1,
                                   env_id=lambda: FrameRecorder(make(), frames), keep_state=False)
    try:
        # the policies themselves, as test phases play them (not a league's mix of members)
        runner = Runner(env, exp.specs, exp.eval_actors, set(), None, copies)
        runner.reset(derived_seed(cfg.train.seed, "render") if seed is None else seed)
        while runner.episodes < episodes:
            runner.step(explore=False)
    finally:
        env.close()
    while frames and frames[-1][0] == "start":  # the episode after the last one
        frames.pop()
    kept = [(i, f) for i, (_, f) in enumerate(frames) if f is not None]
    if not kept:
        raise ConfigError(f"env {env_id!r} returned no frames from render() with render_mode='rgb_array'")
    # A frame followed by an episode's start (or by nothing) is that episode's last: hold it.
    ends = {i for i in range(len(frames)) if i + 1 == len(frames) or frames[i + 1][0] == "start"}
    durations = [float(END_FRAME_MS if i in ends else FRAME_MS) for i, _ in kept]
    return np.stack([np.asarray(f) for _, f in kept]), durations


FRAME_MS = 100
END_FRAME_MS = 1000


class FrameRecorder:
    """A PettingZoo env that keeps a frame after each ``reset`` (``"start"``) and ``step``.

    Frames are drawn before the vector env resets a finished copy, so each episode's final
    state is among them. Everything else goes to the env itself.
    """

    def __init__(self, env: Any, frames: list[tuple[str, Any]]):
        self.env = env
        self.frames = frames

    def __getattr__(self, name: str) -> Any:
        if name == "env":  # not set yet (a copy being unpickled): no recursion
            raise AttributeError(name)
        return getattr(self.env, name)

    def reset(self, *args: Any, **kwargs: Any) -> Any:
        out = self.env.reset(*args, **kwargs)
        self.frames.append(("start", self.env.render()))
        return out

    def step(self, action: Any) -> Any:
        out = self.env.step(action)
        self.frames.append(("step", self.env.render()))
        return out
