"""What policies see (flattened, masked, stacked) and what envs get back (clipped, unsquashed)."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces
from helpers import QUIET, read_metrics

from interplay import Callbacks, register_env
from interplay.config.loading import load
from interplay.config.validation import validate
from interplay.envs.adapters import EnvContractError
from interplay.envs.spaces import action_view, obs_view
from interplay.envs.toy import ShiftingCrowd
from interplay.errors import NonFiniteError
from interplay.experiment.build import make_specs, make_vec_env
from interplay.experiment.loop import train
from interplay.run.actors import ActBatch
from interplay.run.runner import Runner


class Recorder:
    squashed = False
    wants_env_obs = True

    def __init__(self):
        self.seen: list[ActBatch] = []

    def act(self, batch, explore):
        self.seen.append(batch)
        return np.ones(len(batch.obs), np.int64), {}


def test_dict_observations_are_flattened_and_the_mask_kept_aside():
    space = spaces.Dict({"observation": spaces.Box(0, 1, (2, 3)), "action_mask": spaces.Box(0, 1, (4,), np.int8)})
    view = obs_view(space, "p")
    assert view.dim == 6 and view.has_mask_key
    out = np.zeros(6, np.float32)
    view.flatten({"observation": np.arange(6).reshape(2, 3) / 10, "action_mask": np.ones(4)}, out)
    assert out.tolist() == pytest.approx([0, 0.1, 0.2, 0.3, 0.4, 0.5])
    mixed = spaces.Dict({"a": spaces.Discrete(3), "b": spaces.Box(-1, 1, (2,))})
    assert obs_view(mixed, "p").dim == 5


def test_frame_stacking_is_per_agent_and_restarts_each_episode():
    register_env("crowd_stack", ShiftingCrowd)
    cfg = validate({"env": {"id": "crowd_stack"}, "policies": {"a": {"stack_size": 3}}})
    env, copies = make_vec_env(cfg)
    specs = make_specs(cfg, env)
    rec = Recorder()
    runner = Runner(env, specs, {"a": rec}, copies=copies)
    runner.reset(seed=0)
    for _ in range(12):
        runner.step()
    # obs are [t, agent index]; a_1 arrives at t=2, so its first stack is zeros, zeros, [2, 1].
    first_a1 = next(b for b in rec.seen if "a_1" in b.agent_ids)
    row = first_a1.obs[first_a1.agent_ids.index("a_1")]
    assert row.tolist() == [0, 0, 0, 0, 2, 1]
    at_t3 = rec.seen[3].obs[rec.seen[3].agent_ids.index("a_2")]
    assert at_t3.tolist() == [1, 2, 2, 2, 3, 2]
    # Episode 2 (10 steps each) starts again from zeros.
    restart = rec.seen[10].obs[rec.seen[10].agent_ids.index("a_2")]
    assert restart.tolist() == [0, 0, 0, 0, 0, 2]


def test_box_actions_are_clipped_or_unsquashed():
    view = action_view(spaces.Box(np.array([0.0, -2.0]), np.array([1.0, 2.0])), "p")
    raw = np.array([[2.0, -3.0], [-1.0, 0.5]], np.float32)
    assert view.to_env_batch(raw, squashed=False).tolist() == [[1.0, -2.0], [0.0, 0.5]]
    assert view.to_env_batch(raw, squashed=True).tolist() == [[1.0, -2.0], [0.0, 1.0]]


def first_legal(obs, agent):
    assert isinstance(obs, dict) and "action_mask" in obs, "scripted policies see the env's own obs"
    return int(np.flatnonzero(obs["action_mask"])[0])


def test_scripted_policy_gets_the_env_observation_with_its_mask(tmp_path):
    cfg = load([], ["env.id=pettingzoo.classic.connect_four_v3", "train.steps=400",
                    "log.every=400", *QUIET, "policies.player.type=scripted",
                    f"policies.player.fn={__name__}:first_legal"])
    train(cfg, tmp_path)
    row = read_metrics(tmp_path)[-1]
    assert row["episodes"] > 0 and row["episode_return_min"] == row["episode_return_max"] == 0


class QueueMetrics(Callbacks):
    def on_episode_step(self, *, episode, env_index, runner):
        episode.add_metric("queue_len", episode.length, reduce="max")
        episode.add_metric("queue_sum", 1.0, reduce="sum")

    def on_episode_end(self, *, episode, env_index, runner):
        episode.add_metric("goals", sum(episode.returns.values()), reduce="mean")
        episode.add_metric("final_len", episode.length, reduce="last")


def test_callbacks_add_custom_metrics_with_reductions(tmp_path):
    register_env("crowd_cb", ShiftingCrowd)
    cfg = load([], ["env.id=crowd_cb", "train.steps=50", "log.every=50", *QUIET,
                    f"train.callbacks=[{__name__}:QueueMetrics]"])
    train(cfg, tmp_path)
    row = read_metrics(tmp_path)[-1]
    assert row["queue_len"] == 10 and row["queue_sum"] == 50 and row["final_len"] == 10
    assert row["goals"] == pytest.approx(row["episode_return_mean"])


def test_callbacks_given_to_train_get_every_hook_too(tmp_path):
    register_env("crowd_cb2", ShiftingCrowd)
    cfg = load([], ["env.id=crowd_cb2", "train.steps=50", "log.every=50", *QUIET])
    train(cfg, tmp_path, callbacks=[QueueMetrics()])
    row = read_metrics(tmp_path)[-1]
    assert row["queue_len"] == 10 and row["queue_sum"] == 50 and row["final_len"] == 10


class BadReward(ShiftingCrowd):
    """Pays agent a_2 ``value`` at step ``at``."""

    def __init__(self, at: int, value: object):
        super().__init__()
        self.at, self.value = at, value

    def step(self, actions):
        obs, rew, term, trunc, info = super().step(actions)
        if self.t == self.at:
            rew["a_2"] = self.value
        return obs, rew, term, trunc, info


@pytest.mark.parametrize(("at", "value", "error", "message"), [
    (4, float("nan"), NonFiniteError, r"reward of agent 'a_2'.*env step 4"),
    (3, "three", EnvContractError, r"reward of agent 'a_2' is 'three'; rewards must be numbers"),
])
def test_a_bad_reward_stops_naming_agent(tmp_path, at, value, error, message):
    register_env("crowd_bad_reward", lambda: BadReward(at, value))
    cfg = load([], ["env.id=crowd_bad_reward", "train.steps=50", *QUIET])
    with pytest.raises(error, match=message):
        train(cfg, tmp_path)
    assert not list(tmp_path.glob("**/checkpoints/*"))


def test_heterogeneous_spaces_and_info_masks(tmp_path):
    cfg = load([], ["env.id=broken_envs:mixed_spaces", "env.num_envs=2", "train.steps=200",
                    *QUIET])
    result = train(cfg, tmp_path)
    row = read_metrics(tmp_path)[-1]
    assert result.env_steps == 200 and row["episodes"] == 16
    assert {"policy_return_mean/mover", "policy_return_mean/voter", "policy_return_mean/picker"} <= set(row)


def test_nan_observation_stops_naming_agent_and_step(tmp_path):
    cfg = load([], ["env.id=broken_envs:nan_obs_env", "train.steps=50", *QUIET])
    with pytest.raises(NonFiniteError, match=r"observation of agent 'a_\d'.*env step 3"):
        train(cfg, tmp_path)
