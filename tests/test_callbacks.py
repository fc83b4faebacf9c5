"""What callbacks see: each finished episode's end, and the env handle where there is one."""

from __future__ import annotations

import numpy as np
import pytest

from interplay import Callbacks
from interplay.config.loading import load
from interplay.envs.toy import ShiftingCrowd
from interplay.experiment.loop import train

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]


class InfoCrowd(ShiftingCrowd):
    """ShiftingCrowd whose infos tell each agent the step count."""

    def step(self, actions):
        obs, rewards, terms, truncs, infos = super().step(actions)
        return obs, rewards, terms, truncs, {a: {"t": self.t} for a in infos}


def info_crowd(**kwargs):
    return InfoCrowd(**kwargs)


def never_zero(obs, agent_id):
    return 1


class Ends(Callbacks):
    def __init__(self):
        self.ended: list = []  # (env_index, episode, what its env looked like then)
        self.started_on_live_env: list[bool] = []

    def on_episode_start(self, *, episode, env_index, runner):
        copies = getattr(runner.env, "copies", None)
        if copies is not None:
            self.started_on_live_env.append(episode.env is copies[env_index].env)

    def on_episode_end(self, *, episode, env_index, runner):
        self.ended.append((env_index, episode, getattr(episode.env, "t", None)))


@pytest.mark.parametrize(("where", "policy"), [
    ("sync", "scripted"), ("async", "scripted"), ("async", "random")])
def test_on_episode_end_gets_each_agents_last_observation_reward_flags_and_info(
        tmp_path, where, policy):
    # A scripted policy has the workers send the env's own observations every step; a random
    # one does not, and the final infos must come back all the same.
    ends = Ends()
    scripted = ["policies.a.type=scripted", f"policies.a.fn={__name__}:never_zero"]
    cfg = load([], [f"env.id={__name__}:info_crowd", "env.num_envs=2", "train.steps=40",
                    f"env.vectorization={where}", "env.num_workers=1",
                    *(scripted if policy == "scripted" else ["policies.a.type=random"]), *QUIET])
    train(cfg, tmp_path, callbacks=[ends])
    assert len(ends.ended) == 4
    for _, episode, env_t in ends.ended:
        final = episode.final
        assert sorted(final) == ["a_0", "a_1", "a_2", "a_3"]
        # (agent, the step it ended at, its index, terminated): a_2 is cut at step 10.
        for agent, t, i, terminated in [("a_0", 4, 0, True), ("a_1", 7, 1, True),
                                        ("a_2", 10, 2, False), ("a_3", 6, 3, True)]:
            end = final[agent]
            assert end.obs.tolist() == [t, i], agent
            if policy == "scripted":  # random actions of 0 cost 1
                assert end.reward == pytest.approx(t * 0.1 + i), agent
            assert (end.terminated, end.truncated) == (terminated, not terminated), agent
            assert end.info == {"t": t}, agent
        if where == "sync":  # the copy's env, already reset for the next episode
            assert isinstance(episode.env, InfoCrowd) and env_t == 0
        else:  # the env lives in a worker process
            assert episode.env is None


def test_turn_based_games_and_built_in_envs_give_the_final_state_too(tmp_path):
    ends = Ends()
    train(load([], ["env.id=pettingzoo.classic.connect_four_v3", "train.steps=300", *QUIET]),
          tmp_path / "c4", callbacks=[ends])
    assert ends.ended
    for _, episode, _ in ends.ended:
        final = episode.final
        assert sorted(final) == ["player_0", "player_1"]
        assert all(end.terminated and not end.truncated for end in final.values())
        assert final["player_0"].obs.shape == (6, 7, 2)  # the board, the mask left out
        assert sum(end.reward for end in final.values()) == 0  # a win, a loss, or a draw
        assert final["player_0"].reward == episode.returns["player_0"]  # paid only at the end

    ends = Ends()
    train(load([], ["env.id=spread", "env.num_envs=3", "train.steps=75", *QUIET]),
          tmp_path / "spread", callbacks=[ends])
    assert len(ends.ended) == 3
    for _, episode, _ in ends.ended:
        assert episode.env is None
        assert sorted(episode.final) == ["agent_0", "agent_1", "agent_2"]
        for end in episode.final.values():
            assert end.truncated and not end.terminated and end.info == {}
            assert end.obs.shape == (18,) and np.isfinite(end.reward)


def flaky(**kwargs):
    from faulty_envs import FlakyCounter

    return FlakyCounter(p=0.2)


def test_episode_env_is_the_copys_env_even_after_it_was_rebuilt(tmp_path):
    ends = Ends()
    result = train(load([], [f"env.id={__name__}:flaky", "env.num_envs=2", "train.steps=200",
                             "env.max_failures=50", *QUIET]), tmp_path, callbacks=[ends])
    assert result.last["env_failures"] > 0
    assert ends.started_on_live_env and all(ends.started_on_live_env)
