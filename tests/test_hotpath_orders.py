"""The many-agent hot path's shortcuts keep their promises.

The adapter hands the buffers the movers' order as one object while it holds, and the buffers
then skip re-deriving it; moves of some agents come from the whole action row by their
columns; a random policy is handed no observation rows; DQN works out Q-values only for the
rows that act greedily. Each shortcut is held against the long way here.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from broken_envs import nan_obs_env
from gymnasium import spaces
from helpers import make_runner

from interplay.algos.dqn import masked_argmax
from interplay.config.validation import validate
from interplay.envs.batch import ActionBlocks
from interplay.envs.registry import register_env
from interplay.envs.snapshot import capture, restore
from interplay.envs.spaces import ObservationError
from interplay.envs.toy.swarm import Swarm
from interplay.envs.vector import SyncVecEnv
from interplay.errors import NonFiniteError
from interplay.experiment.build import make_actors, make_algorithm, make_specs, make_vec_env
from interplay.run.actors import ActBatch, RandomActor


class Thinning(Swarm):
    """Agents leave one by one; on odd steps every dict comes in reverse order; every move is
    recorded. (The swarm moves on with every bee inside; the gone ones are not shown.)
    ``wide`` repeats each observation that many times (and numbers its copies), so that a
    block of them is big enough to be joined rather than converted."""

    def __init__(self, wide: int = 1, drop: int = 3, **kwargs):
        super().__init__(**kwargs)
        self.moves: list[dict] = []
        self.wide, self.drop = wide, drop
        self._obs_space = spaces.Box(-4.0, 4.0 + wide, (4 * wide,), np.float32)

    def _observe(self):
        obs, dist = super()._observe()
        if self.wide > 1:
            lift = np.repeat(np.arange(self.wide, dtype=np.float32), 4)
            obs = {a: np.tile(o, self.wide) + lift for a, o in obs.items()}
        return obs, dist

    def reset(self, seed=None, options=None):
        obs, infos = super().reset(seed, options)
        self.alive = list(self.agents)
        return obs, infos

    def step(self, actions):
        self.moves.append(dict(actions))
        were = list(self.alive)
        self.agents = list(self.possible_agents)
        obs, rew, term, trunc, info = super().step({a: actions.get(a, 0) for a in self.agents})
        over = not self.agents
        if self.t % self.drop == 0 and len(self.alive) > 1:
            gone = self.alive[self.t % len(self.alive)]
            term[gone] = True
            self.alive.remove(gone)
        order = were[::-1] if self.t % 2 else were
        obs, rew, term, trunc, info = ({a: d[a] for a in order}
                                       for d in (obs, rew, term, trunc, info))
        self.agents = [] if over else list(self.alive)
        self.last_obs = obs
        return obs, rew, term, trunc, info


# wide 200: 800 numbers each, blocks big enough to be joined; 60 agents, one leaving every
# step: runs broken by more gaps than are written slice by slice.
@pytest.mark.parametrize(("wide", "n", "drop"), [(1, 12, 3), (200, 12, 3), (1, 60, 1),
                                                 (200, 60, 1)])
def test_moves_and_blocks_follow_agents_that_leave_and_orders_that_change(wide, n, drop):
    env = SyncVecEnv(lambda: Thinning(wide=wide, drop=drop, n_agents=n, max_cycles=20),
                     num_envs=2, raw_obs=True)
    rng = np.random.default_rng(0)
    step = env.reset(seed=0)
    for _ in range(45):  # past two episode ends
        block = rng.integers(5, size=(2, n))
        movers = [[a for a, on in zip(env.agents, step.acting[e], strict=True) if on]
                  for e in range(2)]
        step = env.step(ActionBlocks([(tuple(env.agents), block)]))
        for e in range(2):
            copy = env.copies[e].env
            if movers[e] and copy.moves:
                got = copy.moves[-1]
                assert sorted(got) == sorted(movers[e])  # in the order their observations came
                assert {a: int(x) for a, x in got.items()} == {
                    a: int(block[e, env.agents.index(a)]) for a in got}
            for a, o in step.raw_obs[e].items():
                np.testing.assert_array_equal(step.obs[a][e], np.asarray(o, np.float32))
                assert step.acting[e, env.agents.index(a)]
            assert step.acting[e].sum() == len(step.raw_obs[e])
            for i in np.flatnonzero(step.terminated[e] | step.truncated[e]):
                a = env.agents[i]  # its last observation, as the step that ended it gave it
                np.testing.assert_array_equal(step.final_obs[a][e],
                                              np.asarray(copy.last_obs[a], np.float32))
    env.close()


class _Looking(RandomActor):
    """Acts at random, but says it reads its observations."""

    reads_obs = True


class Rows(Thinning):
    """Every observation a row of one array, as magent2 hands them; at step ``nan_at`` the
    sixth live agent's holds a NaN."""

    def __init__(self, nan_at: int | None = None, **kwargs):
        super().__init__(**kwargs)
        self.nan_at = nan_at

    def _observe(self):
        obs, dist = super()._observe()
        rows = np.stack(list(obs.values()))
        if self.t == self.nan_at:
            rows[5, 1] = np.nan
        self.latest = dict(zip(obs, rows, strict=True))
        return self.latest, dist

    def movers(self) -> dict[str, np.ndarray]:
        """What the agents that act next were handed."""
        return {a: self.latest[a] for a in self.agents}


register_env("hotpath_rows", lambda **kw: Rows(n_agents=12, max_cycles=30, **kw))


def test_a_random_policy_is_handed_no_observation_rows_and_they_are_still_checked():
    register_env("hotpath_nan_obs", nan_obs_env)
    seen = []
    runner = make_runner({"env": {"id": "hotpath_nan_obs"}}, collect=False)
    actor = runner.groups[0].actor
    act = actor.act

    def spy(batch: ActBatch, explore: bool):
        seen.append(batch.obs.shape)
        return act(batch, explore)

    actor.act = spy
    runner.reset(0)
    with pytest.raises(NonFiniteError, match=r"observation of agent 'a_\d'"):
        for _ in range(6):  # up to the step whose observations hold NaN
            runner.step()
    assert seen and any(width == 0 for _, width in seen)  # some steps, only some agents act
    # Rows of one array nobody reads are left unwritten, and still checked.
    runner = make_runner({"env": {"id": "hotpath_rows", "kwargs": {"nan_at": 7}}},
                         collect=False)
    runner.reset(0)
    with pytest.raises(NonFiniteError, match=r"observation of agent 'bee_\d+'.*env step 7"):
        for _ in range(9):
            runner.step()


def test_observations_left_unwritten_are_there_when_a_reader_takes_over():
    runner = make_runner({"env": {"id": "hotpath_rows"}}, collect=False)
    runner.reset(0)
    g, env = runner.groups[0], runner.env.copies[0].env
    stale = 0
    for _ in range(10):
        runner.step()
        live = env.movers()
        stale += not all(np.array_equal(g.obs[0, runner.specs[g.spec.id].agents.index(a)], o)
                         for a, o in live.items())
    assert stale  # skipped: the block is behind the env
    # Whoever asks the env for its step (a checkpoint does, before it copies the env) gets
    # them written.
    now = runner.env.current_step()
    for a, o in env.movers().items():
        np.testing.assert_array_equal(now.obs[a][0], o)
    # A league hands the group an actor that reads them: it acts on what the env gave.
    got = []
    looking = _Looking(g.spec, np.random.default_rng(0))
    act = looking.act

    def spy(batch: ActBatch, explore: bool):
        got.append((batch.env.copy(), batch.slot.copy(), batch.obs.copy()))
        return act(batch, explore)

    looking.act = spy
    g.actor = looking
    for _ in range(3):
        want = env.movers()
        runner.step()
        e, s, obs = got[-1]
        agents = runner.specs[g.spec.id].agents
        assert sorted(agents[j] for j in s) == sorted(want)
        for j, o in zip(s, obs, strict=True):
            np.testing.assert_array_equal(o, want[agents[j]])


@pytest.mark.parametrize("wide", [1, 200])
def test_skipped_blocks_are_written_exactly_when_filled(wide):
    """A Parallel env whose blocks nobody reads is stepped with them skipped (its observations
    are rows of one array); filled, they hold what the env gave each agent, after agents left
    and orders changed."""
    env = SyncVecEnv(lambda: Rows(wide=wide, n_agents=12, max_cycles=20), num_envs=2,
                     raw_obs=True)
    rng = np.random.default_rng(0)
    step = env.reset(seed=0)
    everyone = frozenset(env.agents)
    stale = 0  # steps where some block was left behind the env

    def current(e, a, o):
        return np.array_equal(step.obs[a][e], np.asarray(o, np.float32))

    for t in range(45):
        env.skip_obs(everyone)
        step = env.step(ActionBlocks([(tuple(env.agents), rng.integers(5, size=(2, 12)))]))
        stale += not all(current(e, a, o) for e in range(2) for a, o in step.raw_obs[e].items())
        if t % 4 == 0:
            env.fill_obs()
            for e in range(2):
                for a, o in step.raw_obs[e].items():
                    assert current(e, a, o), (t, e, a)
    assert stale > 20
    env.close()


@pytest.mark.parametrize("masked", [False, True])
def test_dqn_computes_q_only_for_greedy_rows_and_acts_as_with_all_of_them(masked):
    cfg = validate({"env": {"id": "interplay.envs.swarm", "kwargs": {"n_agents": 40}},
                    "algo": {"name": "dqn", "epsilon_start": 0.5, "epsilon_end": 0.5},
                    "train": {"device": "cpu"}})
    env, _ = make_vec_env(cfg)
    specs = make_specs(cfg, env)
    algo = make_algorithm(cfg, specs, "cpu", env.turn_based)
    actor = make_actors(cfg, specs, algo)[next(iter(specs))]
    rng = np.random.default_rng(3)
    obs = rng.normal(size=(40, 4)).astype(np.float32)
    mask = rng.random((40, 5)) < 0.5 if masked else None
    if mask is not None:
        mask[:, 2] = True
    state = actor.policy.act_rng.bit_generator.state
    action, _ = actor.act(ActBatch(obs=obs, mask=mask), explore=True)
    # the long way: Q-values of every row, then the same draws
    actor.policy.act_rng.bit_generator.state = state
    random, take = actor._draws(mask, 40)
    with torch.no_grad():
        q = actor.policy.online(torch.from_numpy(obs)).numpy()
    want = np.where(take, random, masked_argmax(q, mask))
    assert 0 < take.sum() < 40
    np.testing.assert_array_equal(action, want)
    if mask is not None:
        assert mask[np.arange(40), action].all()
    env.close()


class Shuffled(Swarm):
    """Hands its dicts over in a new random order every step."""

    def step(self, actions):
        out = super().step(actions)
        order = list(out[0])
        self._rng.shuffle(order)
        return tuple({a: d[a] for a in order if a in d} for d in out)


def test_ever_new_orders_keep_a_bounded_set_of_plans_and_land_in_their_columns():
    from interplay.envs import batch

    env = SyncVecEnv(lambda: Shuffled(n_agents=10, max_cycles=400), num_envs=1, raw_obs=True)
    env.reset(seed=0)
    zeros = ActionBlocks([(tuple(env.agents), np.zeros((1, 10), np.int64))])
    snap = None
    for t in range(batch._KEPT + 40):
        step = env.step(zeros)
        for a, o in step.raw_obs[0].items():
            np.testing.assert_array_equal(step.obs[a][0], np.asarray(o, np.float32))
        assert len(env._buf._derived.plans) <= batch._KEPT
        if t == 20:
            snap, then = capture(env), {a: step.obs[a][0].copy() for a in env.agents}
    assert len(env._buf._derived.plans) < batch._KEPT  # emptied once on the way
    # A snapshot passes the plans by; put back, the copy's order gets its plan again.
    restore(env, snap)
    env.restored()
    step = env.current_step()
    for a in env.agents:
        np.testing.assert_array_equal(step.obs[a][0], then[a])
    for _ in range(5):
        step = env.step(zeros)
        for a, o in step.raw_obs[0].items():
            np.testing.assert_array_equal(step.obs[a][0], np.asarray(o, np.float32))
    env.close()


def test_first_marks_each_agents_first_action_of_an_episode_as_agents_leave():
    """Who acts is kept while the env says it did not change; ``first`` still marks exactly
    each agent's first action of each episode (agents leave on their way, two copies)."""
    register_env("hotpath_thinning", lambda **kw: Thinning(n_agents=20, drop=2, max_cycles=9))
    runner = make_runner({"env": {"id": "hotpath_thinning", "num_envs": 2}}, collect=False)
    g = runner.groups[0]
    calls = []
    act = g.actor.act

    def spy(batch: ActBatch, explore: bool):
        calls.append((batch.env.copy(), batch.slot.copy(), np.asarray(batch.first).copy()))
        return act(batch, explore)

    g.actor.act = spy
    runner.reset(0)
    acted: list[set] = [set(), set()]
    partial = 0
    for _ in range(40):  # four episodes in each copy
        runner.step()
        e, s, first = calls[-1]
        partial += len(e) < 40
        for i, j, f in zip(e.tolist(), s.tolist(), first.tolist(), strict=True):
            assert f == (j not in acted[i]), (i, j)
            acted[i].add(j)
        for i in np.flatnonzero(runner._step.episode_end):
            acted[i] = set()
    assert partial > 20


class Blinking:
    """A Parallel env whose agents leave (terminated) one every third step and come back two
    steps later, within the episode; the episode is cut at ``max_cycles``."""

    metadata = {"name": "blinking"}

    def __init__(self, n: int = 12, max_cycles: int = 15):
        self.possible_agents = [f"b_{i}" for i in range(n)]
        self.max_cycles = max_cycles
        self._obs = spaces.Box(-1.0, 1.0, (4,), np.float32)
        self._act = spaces.Discrete(5)

    def observation_space(self, agent):
        return self._obs

    def action_space(self, agent):
        return self._act

    def _observe(self):
        return {a: np.full(4, (self.t % 7) / 7, np.float32) for a in self.agents}

    def reset(self, seed=None, options=None):
        self.t, self.agents, self.away = 0, list(self.possible_agents), {}
        return self._observe(), {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        were = list(self.agents)
        back = [a for a, t in self.away.items() if self.t - t >= 2]
        for a in back:
            del self.away[a]
        leaving = (self.possible_agents[self.t // 3 % len(self.possible_agents)]
                   if self.t % 3 == 0 else None)
        term = {a: a == leaving for a in were}
        cut = self.t >= self.max_cycles
        trunc = dict.fromkeys(were, cut)
        if leaving in were and not cut:
            self.away[leaving] = self.t
        self.agents = [] if cut else [a for a in self.possible_agents
                                      if (a in were and a != leaving) or a in back]
        obs = {a: np.full(4, (self.t % 7) / 7, np.float32) for a in were}
        obs.update(self._observe())
        return obs, dict.fromkeys(were, 1.0), term, trunc, {a: {} for a in were}

    def close(self):
        pass


def test_first_marks_the_first_action_of_agents_that_come_back():
    register_env("hotpath_blinking", lambda **kw: Blinking())
    runner = make_runner({"env": {"id": "hotpath_blinking"}}, collect=False)
    g = runner.groups[0]
    calls = []
    act = g.actor.act

    def spy(batch: ActBatch, explore: bool):
        calls.append((batch.slot.copy(), np.asarray(batch.first).copy()))
        return act(batch, explore)

    g.actor.act = spy
    runner.reset(0)
    acted: set = set()
    firsts = 0
    for _ in range(45):
        runner.step()
        s, first = calls[-1]
        for j, f in zip(s.tolist(), first.tolist(), strict=True):
            assert f == (j not in acted), j
            acted.add(j)
            firsts += f
        blocks = runner._step.groups[g.spec.id]
        acted -= set(np.flatnonzero(blocks.terminated[0] | blocks.truncated[0]).tolist())
    assert firsts > 45  # three episodes' starts and a dozen returns


class TwoTeams(Blinking):
    """Two teams (``x_*``, ``y_*``) in one env, every move recorded."""

    def __init__(self):
        super().__init__()
        self.possible_agents = [*(f"x_{i}" for i in range(3)), *(f"y_{i}" for i in range(4))]
        self.moves: list[dict] = []

    def step(self, actions):
        self.moves.append({a: int(x) for a, x in actions.items()})
        return super().step(actions)


def test_teams_in_one_copy_hand_the_env_exactly_the_moves_their_policies_chose():
    """With one copy, the teams' action blocks are views of one array the env reads every move
    off; each agent still gets its own policy's choice, as agents leave and come back."""
    register_env("hotpath_two_teams", lambda **kw: TwoTeams())
    runner = make_runner({"env": {"id": "hotpath_two_teams"}}, collect=False)
    assert len(runner.groups) == 2
    assert runner._actions.whole is not None  # the one array both blocks are views of
    chosen: dict[str, int] = {}
    for g in runner.groups:
        act, agents = g.actor.act, g.spec.agents

        def spy(batch: ActBatch, explore: bool, act=act, agents=agents):
            action, extras = act(batch, explore)
            chosen.update((agents[j], int(x)) for j, x in zip(batch.slot, action, strict=True))
            return action, extras

        g.actor.act = spy
    runner.reset(0)
    env = runner.env.copies[0].env
    for _ in range(30):
        chosen.clear()
        runner.step()
        assert env.moves[-1] == chosen
    assert len({a[0] for a in chosen}) == 2


class SpacedTeams(TwoTeams):
    """Two teams whose actions are not Discrete from 0, every move recorded as it came."""

    def __init__(self, x_space, y_space):
        super().__init__()
        self.spaces = {"x": x_space, "y": y_space}

    def action_space(self, agent):
        return self.spaces[agent[0]]

    def step(self, actions):
        self.moves.append(dict(actions))
        return Blinking.step(self, actions)


@pytest.mark.parametrize("num_envs", [1, 2])
@pytest.mark.parametrize("x_space, y_space, lined_up", [
    (spaces.Box(-1.0, 1.0, (2,), np.float32), spaces.Box(-2.0, 2.0, (2,), np.float32), True),
    (spaces.MultiDiscrete([3, 4], start=[1, -2]), spaces.MultiDiscrete([2, 2]), True),
    (spaces.Discrete(5, start=2), spaces.Discrete(3), True),
    (spaces.Box(-1.0, 1.0, (2,), np.float64), spaces.Box(-1.0, 1.0, (3,), np.float32), False),
    (spaces.Discrete(4, start=-1), spaces.Box(-1.0, 1.0, (1,), np.float32), False),
], ids=["box", "multi_discrete", "discrete_start", "box_shapes_differ", "kinds_differ"])
def test_converted_actions_reach_the_env_as_each_agent_chose(x_space, y_space, lined_up,
                                                             num_envs):
    """Actions the env takes in another form (Box in its dtype, Discrete and MultiDiscrete
    from their start) are converted a block at a time where the blocks line up, else agent by
    agent; either way each agent gets its own choice, in the space's form, as agents leave
    and come back."""
    register_env("hotpath_spaced", lambda **kw: SpacedTeams(x_space, y_space))
    runner = make_runner({"env": {"id": "hotpath_spaced", "num_envs": num_envs}}, collect=False)
    assert len(runner.groups) == 2
    runner.reset(0)
    envs = [c.env for c in runner.env.copies]
    for _ in range(40):
        acting = runner._step.acting.copy()
        runner.step()
        for e, env in enumerate(envs):
            got = env.moves[-1]
            movers = [a for i, a in enumerate(runner.env.agents) if acting[e, i]]
            assert sorted(got) == sorted(movers)  # in the order the env last listed them
            for g in runner.groups:
                space = env.action_space(g.spec.agents[0])
                for j, a in enumerate(g.spec.agents):
                    if a not in got:
                        continue
                    want = g.actions[e, j]
                    if isinstance(space, spaces.Box):
                        assert got[a].dtype == space.dtype and got[a].shape == space.shape
                        np.testing.assert_array_equal(got[a], want.astype(space.dtype))
                    else:
                        assert np.all(np.asarray(got[a]) == want + space.start), (a, got[a])
                    assert space.contains(np.asarray(got[a], dtype=space.dtype)), (a, got[a])
    assert bool(runner.env._buf._derived.whole_views) == lined_up  # the way it went


class CutRow(Rows):
    """Rows of one array, but from step 4 on the third agent is handed only part of its row."""

    def _observe(self):
        obs, dist = super()._observe()
        if self.t >= 4:
            a = list(obs)[2]
            obs[a] = obs[a][:3]
        return obs, dist


def test_a_row_left_unwritten_that_breaks_its_space_is_named_once_read():
    register_env("hotpath_cut_row", lambda **kw: CutRow(n_agents=12, max_cycles=30))
    runner = make_runner({"env": {"id": "hotpath_cut_row"}}, collect=False)
    runner.reset(0)
    for _ in range(6):  # nobody reads it
        runner.step()
    g = runner.groups[0]
    g.actor = _Looking(g.spec, np.random.default_rng(0))
    with pytest.raises(ObservationError, match=r"env copy 0.*bee_\d+.*shape \(3,\)"):
        runner.step()


class SharedBlock(Blinking):
    """Teams ``x`` and ``y`` with observations of one width (so one block), ``z`` with wider
    ones, rows of one array; from step 3 on ``x_1``'s observation holds a NaN. Nobody leaves."""

    def __init__(self):
        super().__init__()
        self.possible_agents = [*(f"x_{i}" for i in range(4)), *(f"y_{i}" for i in range(4)),
                                *(f"z_{i}" for i in range(9))]
        self._wide = spaces.Box(-1.0, 1.0, (6,), np.float32)

    def observation_space(self, agent):
        return self._wide if agent[0] == "z" else self._obs

    def _observe(self):
        v = (self.t % 7) / 7
        narrow = np.full((8, 4), v, np.float32)
        if self.t >= 3:
            narrow[1, 0] = np.nan
        wide = np.full((9, 6), v, np.float32)
        return {a: (wide[i - 8] if i >= 8 else narrow[i])
                for i, a in enumerate(self.possible_agents)}

    def step(self, actions):
        self.t += 1
        obs, cut = self._observe(), self.t >= self.max_cycles
        if cut:
            self.agents = []
        agents = list(obs)
        return (obs, dict.fromkeys(agents, 0.0), dict.fromkeys(agents, False),
                dict.fromkeys(agents, cut), {a: {} for a in agents})


def test_a_random_group_whose_block_a_reader_shares_is_still_checked():
    """``x`` acts at random and ``y``, in the same block, reads: that block is written, not
    left, while ``z``'s rows are left; a NaN in ``x``'s observations still stops the run."""
    register_env("hotpath_shared_block", lambda **kw: SharedBlock())
    runner = make_runner({"env": {"id": "hotpath_shared_block"}}, collect=False)
    groups = {g.spec.id: g for g in runner.groups}
    assert set(groups) == {"x", "y", "z"}
    y = groups["y"]
    y.actor = _Looking(y.spec, np.random.default_rng(0))
    runner.reset(0)
    with pytest.raises(NonFiniteError, match=r"observation of agent 'x_1'.*env step 3"):
        for _ in range(6):
            runner.step()


class OwnRows(Blinking):
    """``Blinking`` whose agents each see numbers of their own (``_one``); what each step
    handed out is kept in ``handed``."""

    def _observe(self):
        return {a: self._one(a) for a in self.agents}

    def step(self, actions):
        obs, rew, term, trunc, info = super().step(actions)
        self.handed = {a: self._one(a) for a in obs}
        return self.handed, rew, term, trunc, info


def assert_rows_as_handed(runner, row_of, steps=40) -> int:
    """Step ``runner`` over an ``OwnRows`` env: each acting agent's row is ``row_of(view,
    observation)`` of what the env hands it, and each final row of what the step handed;
    returns how many final rows were checked."""
    finals = 0
    for _ in range(steps):
        runner.step()
        step = runner._step
        for e, copy in enumerate(runner.env.copies):
            env = copy.env
            for g in runner.groups:
                blocks, view = step.groups[g.spec.id], g.spec.obs_view
                for j, a in enumerate(g.spec.agents):
                    if step.acting[e, runner.env.agents.index(a)]:
                        np.testing.assert_array_equal(blocks.obs[e, j], row_of(view, env._one(a)))
                    if blocks.terminated[e, j] or blocks.truncated[e, j]:
                        np.testing.assert_array_equal(blocks.final_obs[e, j],
                                                      row_of(view, env.handed[a]))
                        finals += 1
    return finals


class DictCrowd(OwnRows):
    """``Blinking`` with Dict observations of Boxes (one of them a scalar), each agent's
    numbers its own; from step ``at`` on, agent ``b_5`` is handed ``bad`` instead."""

    def __init__(self, bad=None, at=4):
        super().__init__()
        self._obs = spaces.Dict({"pos": spaces.Box(-9.0, 9.0, (2,), np.float32),
                                 "grid": spaces.Box(-9.0, 9.0, (3,), np.float64),
                                 "hp": spaces.Box(0, 9, (), np.int64)})
        self.bad, self.at = bad, at

    def _one(self, a):
        i = int(a[2:])
        good = {"pos": np.array([i, self.t], np.float32),
                "grid": np.arange(3, dtype=np.float64) * i + self.t / 10,
                "hp": np.int64(i % 9)}
        if a != "b_5" or self.bad is None or self.t < self.at:
            return good
        return {"no_key": {"pos": good["pos"], "grid": good["grid"]},
                "extra_key": {**good, "speed": 3.0},
                "short_pos": {**good, "pos": good["pos"][:1]},
                "text": {**good, "hp": "x"},
                "array": good["pos"]}[self.bad]


def test_dict_observations_of_many_agents_land_as_each_one_alone_would():
    """Dicts of Boxes are written an entry of every agent at a time: each row is exactly the
    agent's own flattened observation, as agents leave and come back, final ones too."""
    register_env("hotpath_dict_crowd", lambda **kw: DictCrowd())
    runner = make_runner({"env": {"id": "hotpath_dict_crowd", "num_envs": 2}}, collect=False)
    (g,) = runner.groups
    view = runner.env.obs_views[g.spec.agents[0]]
    assert view.batched  # the way these take
    runner.reset(0)

    def flat(view, obs):  # as the agent alone would be written
        row = np.zeros(view.dim, np.float32)
        view.flatten(obs, row)
        return row

    assert assert_rows_as_handed(runner, flat) > 20


@pytest.mark.parametrize(("bad", "said"), [
    ("no_key", "(keys missing: ['hp'])"),
    ("extra_key", "(keys not in the space: ['speed'])"),
    ("short_pos", "(key 'pos': its shape is not (2,))"),
    ("text", "(key 'hp': its dtype <U1 is not a number type)"),
    ("array", "got an array of shape (2,) and dtype float32"),
])
def test_a_dict_observation_that_does_not_fit_among_many_is_named(bad, said):
    text = observation_error_of("hotpath_dict_bad", lambda **kw: DictCrowd(bad=bad))
    assert "at step 4 of its episode: agent 'b_5': observation space Dict(" in text
    assert said in text


def observation_error_of(env_id: str, make, steps: int = 10) -> str:
    """What stops random play on the env ``make`` builds, within ``steps`` steps."""
    register_env(env_id, make)
    runner = make_runner({"env": {"id": env_id}}, collect=False)
    runner.reset(0)
    with pytest.raises(ObservationError) as info:
        for _ in range(steps):
            runner.step()
    return str(info.value)


class InfoMasks(Blinking):
    """``Blinking`` whose agents get their legal actions in their infos: each its own
    (``own``), one array for all (``shared``), only some agents (``some``), or from step 4 on
    one too short for ``b_5`` (``bad``)."""

    def __init__(self, how="own"):
        super().__init__()
        self.how = how

    def _mask(self, a):
        i = int(a[2:])
        if self.how == "shared":
            return self.shared
        if self.how == "bad" and a == "b_5" and self.t >= 4:
            return np.ones(3, np.int8)
        row = np.ones(5, np.int8)
        row[(i + self.t) % 5] = 0
        return row

    def _infos(self, agents):
        self.shared = np.array([1, 0, 1, 1, self.t % 2], np.int8)
        if self.how == "some":
            return {a: {"action_mask": self._mask(a)} if int(a[2:]) % 2 else {} for a in agents}
        return {a: {"action_mask": self._mask(a)} for a in agents}

    def reset(self, seed=None, options=None):
        obs, _ = super().reset(seed, options)
        self.given = self._infos(self.agents)
        return obs, self.given

    def step(self, actions):
        obs, rew, term, trunc, _ = super().step(actions)
        self.given = self._infos(list(obs))
        return obs, rew, term, trunc, self.given


@pytest.mark.parametrize("how", ["own", "shared", "some"])
def test_masks_many_agents_get_in_their_infos_land_as_each_ones_own(how):
    """Masks from infos are written for a run of agents at once where each got one; every
    row holds exactly that agent's legal actions (all legal where it got none), as agents
    leave and come back."""
    register_env(f"hotpath_info_masks_{how}", lambda **kw: InfoMasks(how))
    runner = make_runner({"env": {"id": f"hotpath_info_masks_{how}", "num_envs": 2}},
                         collect=False)
    (g,) = runner.groups
    runner.reset(0)
    for _ in range(40):
        runner.step()
        step = runner._step
        assert not step.all_legal
        mask = step.groups[g.spec.id].mask
        for e, copy in enumerate(runner.env.copies):
            given = copy.env.given
            for j, a in enumerate(g.spec.agents):
                if step.acting[e, runner.env.agents.index(a)]:
                    want = given[a].get("action_mask", np.ones(5, np.int8)).astype(bool)
                    np.testing.assert_array_equal(mask[e, j], want, err_msg=a)


def test_a_mask_too_short_among_many_in_the_infos_is_named():
    text = observation_error_of("hotpath_info_masks_bad", lambda **kw: InfoMasks("bad"))
    assert re.search(r"at step 4 of its episode: agent 'b_5': action_mask has 3 entries .* "
                     r"needs 5", text), text


class MaskedCrowd(InfoMasks):
    """``InfoMasks`` whose masks come in the observations instead, PettingZoo's board-game
    way (``{"observation": ..., "action_mask": ...}``); from step 4 on ``b_5`` is handed
    ``bad`` instead (``how="bad"`` with ``bad`` one of ``short_mask``, ``no_mask``,
    ``extra_key``, ``bare``, ``short_obs``)."""

    def __init__(self, how="own", bad=None):
        super().__init__(how)
        self.bad = bad
        self._obs = spaces.Dict({"observation": spaces.Box(-1.0, 1.0, (4,), np.float32),
                                 "action_mask": spaces.Box(0, 1, (5,), np.int8)})

    def _wrap(self, obs):
        out = {}
        for a, o in obs.items():
            o = o + int(a[2:]) / 100
            out[a] = {"observation": o, "action_mask": self._mask(a)}
            if a == "b_5" and self.bad is not None and self.t >= 4:
                out[a] = {"short_mask": {"observation": o, "action_mask": np.ones(3, np.int8)},
                          "no_mask": {"observation": o, "other": 1},
                          "extra_key": {"observation": o, "action_mask": self._mask(a), "x": 1},
                          "bare": o,
                          "short_obs": {"observation": o[:3], "action_mask": self._mask(a)},
                          }[self.bad]
        return out

    def reset(self, seed=None, options=None):
        obs, _ = super().reset(seed, options)
        self.given = self._wrap(obs)
        return self.given, {a: {} for a in obs}

    def step(self, actions):
        obs, rew, term, trunc, _ = super().step(actions)
        self.given = self.handed = self._wrap(obs)
        return self.given, rew, term, trunc, {a: {} for a in obs}


@pytest.mark.parametrize("how", ["own", "shared"])
def test_observations_beside_their_masks_of_many_agents_land_as_each_ones_own(how):
    register_env(f"hotpath_masked_crowd_{how}", lambda **kw: MaskedCrowd(how))
    runner = make_runner({"env": {"id": f"hotpath_masked_crowd_{how}", "num_envs": 2}},
                         collect=False)
    (g,) = runner.groups
    runner.reset(0)
    finals = 0
    for _ in range(40):
        runner.step()
        step = runner._step
        blocks = step.groups[g.spec.id]
        for e, copy in enumerate(runner.env.copies):
            given = copy.env.given
            for j, a in enumerate(g.spec.agents):
                if step.acting[e, runner.env.agents.index(a)]:
                    np.testing.assert_array_equal(blocks.obs[e, j], given[a]["observation"])
                    np.testing.assert_array_equal(blocks.mask[e, j],
                                                  given[a]["action_mask"].astype(bool))
                if blocks.terminated[e, j] or blocks.truncated[e, j]:
                    handed = copy.env.handed[a]  # by the step, not the reset after it
                    np.testing.assert_array_equal(blocks.final_obs[e, j], handed["observation"])
                    np.testing.assert_array_equal(blocks.final_mask[e, j],
                                                  handed["action_mask"].astype(bool))
                    finals += 1
    assert finals > 20
    assert any(run.keyed for run in runner.env._buf._derived.of[0].runs)  # the way they went


@pytest.mark.parametrize(("bad", "said"), [
    ("short_mask", "action_mask has 3 entries but the action space Discrete(5) needs 5"),
    ("no_mask", "it holds no action_mask"),
    ("extra_key", "keys not in the space: ['x']"),
    ("bare", "got an array of shape (4,) and dtype float32"),
    ("short_obs", "its shape is not (4,)"),
])
def test_a_dict_with_a_mask_that_does_not_fit_among_many_is_named(bad, said):
    text = observation_error_of("hotpath_masked_bad", lambda **kw: MaskedCrowd("own", bad))
    assert "at step 4 of its episode: agent 'b_5'" in text and said in text, text


class Alternating(OwnRows):
    """Two teams whose agents take turns in the env's order (``x_0, y_1, x_2, ...``), with
    observations of different widths, each agent's numbers its own; agents leave and come
    back as in ``Blinking``."""

    def __init__(self):
        super().__init__(n=24)
        self.possible_agents = [f"{'xy'[i % 2]}_{i}" for i in range(24)]
        self.widths = {"x": 4, "y": 6}

    def observation_space(self, agent):
        return spaces.Box(-99.0, 99.0, (self.widths[agent[0]],), np.float32)

    def _one(self, a):
        return np.arange(self.widths[a[0]], dtype=np.float32) + int(a[2:]) + self.t / 10


def test_teams_that_take_turns_in_the_env_order_land_in_their_blocks():
    """Agents of a team are written together even where the other team's lie between them:
    each row is the agent's own observation, as agents leave and come back, finals too."""
    register_env("hotpath_alternating", lambda **kw: Alternating())
    runner = make_runner({"env": {"id": "hotpath_alternating", "num_envs": 2}}, collect=False)
    assert len(runner.groups) == 2
    runner.reset(0)
    assert assert_rows_as_handed(runner, lambda view, obs: obs) > 40
    runs = runner.env._buf._derived.of[0].runs
    assert len(runs) == 2 and not any(isinstance(r.members, slice) for r in runs)


class Echo(SpacedTeams):
    """``SpacedTeams`` whose agents each see the action they were handed last (as numbers),
    so that what reached the env shows in the observations, in any process."""

    def __init__(self, x_space, y_space):
        super().__init__(x_space, y_space)
        self.last: dict = {}

    def observation_space(self, agent):
        return spaces.Box(-99.0, 99.0, (2,), np.float32)

    def _observe(self):
        return {a: self._echo(a) for a in self.agents}

    def _echo(self, a):
        row = np.zeros(2, np.float32)
        got = np.asarray(self.last.get(a, -9), np.float32).reshape(-1)
        row[:len(got)] = got
        return row

    def step(self, actions):
        self.last = dict(actions)
        obs, rew, term, trunc, info = super().step(actions)
        return {a: self._echo(a) for a in obs}, rew, term, trunc, info


@pytest.mark.parametrize("x_space, y_space", [
    (spaces.Discrete(5, start=2), spaces.Discrete(3)),
    (spaces.MultiDiscrete([3, 4], start=[1, -2]), spaces.MultiDiscrete([2, 2])),
    (spaces.Box(-1.0, 1.0, (2,), np.float32), spaces.Box(-2.0, 2.0, (1,), np.float32)),
], ids=["discrete_start", "multi_discrete", "box_shapes_differ"])
def test_async_workers_hand_their_envs_each_agents_own_choice(x_space, y_space):
    """Async workers read each copy's moves off the shared actions the runner wrote a policy
    block at a time (or agent by agent where the agents' actions differ in shape): each
    agent's observation echoes exactly the action the sync env gives it on the same seed."""
    register_env("hotpath_echo", lambda **kw: Echo(x_space, y_space))
    seen = []
    for vec in ({"vectorization": "sync"}, {"vectorization": "async", "num_workers": 2}):
        runner = make_runner({"env": {"id": "hotpath_echo", "num_envs": 2, **vec}},
                             collect=False)
        runner.reset(0)
        steps = []
        for _ in range(25):
            runner.step()
            steps.append({g.spec.id: runner._step.groups[g.spec.id].obs.copy()
                          for g in runner.groups})
            assert (np.abs(steps[-1][runner.groups[0].spec.id]) < 9).any()  # echoes, not -9
        runner.env.close()
        seen.append(steps)
    for sync, asyn in zip(*seen, strict=True):
        for pid in sync:
            np.testing.assert_array_equal(asyn[pid], sync[pid])


NESTED = spaces.Dict({
    "cell": spaces.Discrete(7, start=-2),
    "seen": spaces.MultiBinary(3),
    "kit": spaces.MultiDiscrete([[2, 3], [4, 2]], start=[[0, 1], [-1, 0]]),
    "pair": spaces.Tuple((spaces.Box(-5, 5, (2,), np.int32), spaces.Discrete(3),
                          spaces.Dict({"v": spaces.Box(-1.0, 1.0, (2, 2), np.float64)}))),
    "pos": spaces.Box(-9.0, 9.0, (3,), np.float32),
})


@pytest.mark.parametrize("space", [
    spaces.Discrete(5), spaces.Discrete(4, start=3), spaces.MultiBinary(6),
    spaces.MultiBinary((2, 3)), spaces.MultiDiscrete([3, 5, 2]),
    spaces.Tuple((spaces.Box(-1.0, 1.0, (2,), np.float32), spaces.Discrete(3))), NESTED,
], ids=lambda s: type(s).__name__)
def test_many_observations_flattened_a_leaf_at_a_time_are_each_ones_own(space):
    """``batch_rows`` gives, row for row, what flattening each observation alone gives."""
    from interplay.envs.spaces import batch_rows, obs_view

    space.seed(3)
    view = obs_view(space, "a_0")
    assert view.batched
    part = [space.sample() for _ in range(40)]
    if isinstance(space, spaces.Dict):  # floats in an int Box below a Tuple: cast as alone
        for o in part:
            o["pair"] = (o["pair"][0] + 0.75, *o["pair"][1:])
    rows = batch_rows(space, part, view.dim)
    assert rows is not None
    for o, row in zip(part, rows, strict=True):
        alone = np.zeros(view.dim, np.float32)
        view.flatten(o, alone)
        np.testing.assert_array_equal(row, alone)


@pytest.mark.parametrize(("space", "bad"), [
    (spaces.Discrete(5), 5), (spaces.Discrete(5, start=1), 0), (spaces.Discrete(5), 1.0),
    (spaces.MultiDiscrete([3, 2]), np.array([1, 2])),
    (spaces.MultiDiscrete([3, 2]), np.array([1])), (spaces.MultiBinary(3), np.ones(4)),
    (spaces.Tuple((spaces.Discrete(2), spaces.Discrete(2))), (1,)),
    (NESTED, "text"), (spaces.Discrete(3), "1"),
], ids=str)
def test_observations_that_do_not_fit_at_a_glance_are_left_to_one_by_one(space, bad):
    from interplay.envs.spaces import batch_rows, obs_view

    view = obs_view(space, "a_0")
    space.seed(0)
    part = [space.sample() for _ in range(12)]
    part[7] = bad
    assert batch_rows(space, part, view.dim) is None


class TupleCrowd(OwnRows):
    """``Blinking`` whose agents see a Tuple of a Discrete cell, a MultiDiscrete kit and a
    Box, each its own numbers."""

    def __init__(self):
        super().__init__()
        self._obs = spaces.Tuple((spaces.Discrete(9, start=1), spaces.MultiDiscrete([3, 4]),
                                  spaces.Box(-99.0, 99.0, (2,), np.float32)))

    def _one(self, a):
        i = int(a[2:])
        return (1 + (i + self.t) % 9, np.array([i % 3, self.t % 4]),
                np.array([i, self.t], np.float32))


def test_tuple_observations_of_many_agents_land_as_each_one_alone_would():
    register_env("hotpath_tuple_crowd", lambda **kw: TupleCrowd())
    runner = make_runner({"env": {"id": "hotpath_tuple_crowd", "num_envs": 2}}, collect=False)
    runner.reset(0)

    def flat(view, obs):
        row = np.zeros(view.dim, np.float32)
        view.flatten(obs, row)
        return row

    assert assert_rows_as_handed(runner, flat) > 20
    assert any(run.dtype is None for run in runner.env._buf._derived.of[0].runs)
