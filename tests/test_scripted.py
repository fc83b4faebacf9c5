"""Scripted policies: the env's own observation, and its legal actions wherever it puts them."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces
from helpers import read_metrics
from pettingzoo import ParallelEnv

from interplay.config.loading import load
from interplay.experiment.loop import train
from interplay.run.actors import accepts_keyword

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]


class InfoMasked(ParallelEnv):
    """One legal action per agent and step, given only in ``info["action_mask"]``.

    A legal move pays 1, an illegal one -1; episodes last 6 steps.
    """

    metadata = {"name": "info_masked"}

    def __init__(self):
        self.possible_agents = ["p_0", "p_1"]

    def observation_space(self, agent):
        return spaces.Box(0, 10, (1,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(3)

    def _legal(self, agent):
        return (self.t + self.possible_agents.index(agent)) % 3

    def _infos(self):
        return {a: {"action_mask": np.eye(3, dtype=np.int8)[self._legal(a)]} for a in self.agents}

    def reset(self, seed=None, options=None):
        self.t, self.agents = 0, list(self.possible_agents)
        return {a: np.array([self.t], np.float32) for a in self.agents}, self._infos()

    def step(self, actions):
        rewards = {a: 1.0 if int(actions[a]) == self._legal(a) else -1.0 for a in self.agents}
        self.t += 1
        done = self.t >= 6
        obs = {a: np.array([self.t], np.float32) for a in self.agents}
        flags = dict.fromkeys(self.agents, done)
        infos = self._infos()
        if done:
            self.agents = []
        return obs, rewards, flags, dict.fromkeys(flags, False), infos


def info_masked():
    return InfoMasked()


SEEN: list = []


def legal_by_keyword(obs, agent_id, action_mask=None):
    SEEN.append((type(obs), action_mask))
    return int(np.flatnonzero(action_mask)[0])


def legal_by_kwargs(obs, agent_id, **kwargs):
    return int(np.flatnonzero(kwargs["action_mask"])[0])


def blind(obs, agent_id):
    return 0


@pytest.mark.parametrize(("fn", "per_step"), [
    ("legal_by_keyword", 1.0), ("legal_by_kwargs", 1.0), ("blind", None)])
def test_a_scripted_policy_gets_the_mask_the_env_puts_in_info(tmp_path, fn, per_step):
    SEEN.clear()
    cfg = load([], [f"env.id={__name__}:info_masked", "env.num_envs=2", "train.steps=24",
                    "policies.p.type=scripted", f"policies.p.fn={__name__}:{fn}", *QUIET])
    train(cfg, tmp_path)
    row = read_metrics(tmp_path)[-1]
    assert row["episodes"] == 4
    if per_step is not None:  # every move legal: 6 steps paying 1 to each of 2 agents
        assert row["episode_return_min"] == row["episode_return_max"] == 12.0
    else:  # a function without the keyword is called as before, and misses legal moves
        assert row["episode_return_min"] < 12.0
    if fn == "legal_by_keyword":
        kinds, masks = zip(*SEEN, strict=True)
        assert set(kinds) == {np.ndarray}  # the env's own observation, not a dict
        assert all(m.dtype == bool and m.shape == (3,) and m.sum() == 1 for m in masks)


def legal_in_dict(obs, agent_id, *, action_mask):
    assert isinstance(obs, dict) and np.array_equal(obs["action_mask"].astype(bool), action_mask)
    return int(np.flatnonzero(action_mask)[0])


def test_a_mask_in_the_observation_comes_as_the_keyword_too(tmp_path):
    cfg = load([], ["env.id=pettingzoo.classic.connect_four_v3", "train.steps=200",
                    "policies.player.type=scripted", f"policies.player.fn={__name__}:legal_in_dict",
                    *QUIET])
    train(cfg, tmp_path)
    assert read_metrics(tmp_path)[-1]["episodes"] > 0


def all_legal(obs, agent_id, action_mask=None):
    assert action_mask.all() and action_mask.shape == (5,)
    return 1


def test_an_env_without_masks_gives_all_actions_legal(tmp_path):
    cfg = load([], ["env.id=mpe2.simple_spread_v3", "train.steps=20", "env.kwargs.max_cycles=5",
                    "policies.agent.type=scripted", f"policies.agent.fn={__name__}:all_legal",
                    *QUIET])
    train(cfg, tmp_path)
    assert read_metrics(tmp_path)[-1]["episodes"] == 4


def test_which_functions_take_the_mask():
    assert accepts_keyword(legal_by_keyword, "action_mask")
    assert accepts_keyword(legal_by_kwargs, "action_mask")
    assert accepts_keyword(legal_in_dict, "action_mask")
    assert not accepts_keyword(blind, "action_mask")
    assert not accepts_keyword(lambda obs, agent_id, *action_mask: 0, "action_mask")
