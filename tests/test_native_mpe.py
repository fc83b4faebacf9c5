"""The natively batched MPE tasks step exactly as mpe2's own envs do."""

from __future__ import annotations

import numpy as np
import pytest

from interplay.envs.native import SpeakerListener, Spread
from interplay.envs.registry import native_env_class

mpe2 = pytest.importorskip("mpe2")
from mpe2 import simple_speaker_listener_v4, simple_spread_v3  # noqa: E402

TOL = 1e-5


def random_actions(env, rng: np.random.Generator, E: int) -> dict[str, np.ndarray]:
    out = {}
    for a in env.agents:
        space = env.action_spaces[a]
        if env.continuous_actions:
            out[a] = rng.random((E, *space.shape)).astype(np.float32)
        else:
            out[a] = rng.integers(space.n, size=E)
    return out


def mpe_action(native, agent: str, row: np.ndarray):
    return row.copy() if native.continuous_actions else int(row)


def crowd(world, rng: np.random.Generator) -> None:
    """Squeeze the agents together so that they collide."""
    for agent in world.agents:
        agent.state.p_pos = rng.uniform(-0.2, 0.2, 2)


def run_parity(native_cls, module, kwargs: dict, seed: int, e: int = 1, E: int = 3,
               crowded: bool = False) -> dict:
    """One whole mpe2 episode against copy ``e`` of a native batch; returns what happened."""
    par = module.parallel_env(**kwargs)
    obs, _ = par.reset(seed=seed)
    raw = par.unwrapped
    rng = np.random.default_rng(seed + 1000)
    if crowded:
        crowd(raw.world, rng)
        obs = {a: raw.observe(a) for a in par.agents}
    native = native_cls(num_envs=E, **kwargs)
    native.reset(seed=seed + 1)
    native.set_state_from_mpe(e, raw.world, raw.steps)
    assert native.agents == par.possible_agents
    np.testing.assert_allclose(native.state()[e], raw.state(), atol=TOL, rtol=0)
    max_cycles = kwargs.get("max_cycles", 25)
    seen = {"steps": 0, "min_reward": 0.0}
    for t in range(max_cycles):
        acts = random_actions(native, rng, E)
        obs, rew, term, trunc, _ = par.step(
            {a: mpe_action(native, a, acts[a][e]) for a in par.agents})
        step = native.step(acts)
        last = t == max_cycles - 1
        for i, a in enumerate(native.agents):
            got = step.final_obs[a][e] if last else step.obs[a][e]
            assert got.dtype == np.float32
            np.testing.assert_allclose(got, obs[a], atol=TOL, rtol=0, err_msg=f"{a} t={t}")
            assert step.reward[e, i] == pytest.approx(rew[a], abs=TOL)
            assert bool(step.truncated[e, i]) == trunc[a] == last
            assert not step.terminated[e, i] and not term[a]
        assert step.acting.all()
        assert bool(step.episode_end[e]) == last
        if last:
            final_state = np.concatenate([step.final_obs[a][e] for a in native.agents])
            np.testing.assert_allclose(final_state, raw.state(), atol=TOL, rtol=0)
            assert par.agents == []
        else:
            np.testing.assert_allclose(native.state()[e], raw.state(), atol=TOL, rtol=0)
        seen["steps"] += 1
        seen["min_reward"] = min(seen["min_reward"], float(step.reward[e].min()))
    par.close()
    return seen


SPREAD_CASES = [
    dict(N=3, local_ratio=0.5, continuous_actions=False),
    dict(N=3, local_ratio=0.5, continuous_actions=True),
    dict(N=5, local_ratio=0.0, continuous_actions=False),
    dict(N=2, local_ratio=1.0, continuous_actions=True),
    dict(N=4, local_ratio=0.25, continuous_actions=False, max_cycles=10),
    dict(N=1, local_ratio=0.5, continuous_actions=False),
]


@pytest.mark.parametrize("kwargs", SPREAD_CASES, ids=lambda k: "-".join(f"{v}" for v in k.values()))
@pytest.mark.parametrize("seed", [0, 7])
def test_spread_matches_mpe2(kwargs, seed):
    seen = run_parity(Spread, simple_spread_v3, kwargs, seed)
    assert seen["steps"] == kwargs.get("max_cycles", 25)


@pytest.mark.parametrize("continuous", [False, True])
def test_spread_collisions_match_mpe2(continuous):
    """Agents packed together push each other apart and are penalised for overlapping."""
    kwargs = dict(N=4, local_ratio=1.0, continuous_actions=continuous)
    seen = run_parity(Spread, simple_spread_v3, kwargs, seed=3, crowded=True)
    assert seen["min_reward"] <= -1.0  # the local-only reward saw at least one collision


@pytest.mark.parametrize("kwargs", [dict(continuous_actions=False), dict(continuous_actions=True),
                                    dict(continuous_actions=False, max_cycles=12)],
                         ids=["discrete", "continuous", "cycles12"])
@pytest.mark.parametrize("seed", [0, 5, 11])
def test_speaker_listener_matches_mpe2(kwargs, seed):
    run_parity(SpeakerListener, simple_speaker_listener_v4, kwargs, seed)


@pytest.mark.parametrize("native_cls,module,kwargs", [
    (Spread, simple_spread_v3, dict(N=3)),
    (Spread, simple_spread_v3, dict(N=2, continuous_actions=True)),
    (SpeakerListener, simple_speaker_listener_v4, dict()),
    (SpeakerListener, simple_speaker_listener_v4, dict(continuous_actions=True)),
])
def test_spaces_match_mpe2(native_cls, module, kwargs):
    par = module.parallel_env(**kwargs)
    native = native_cls(num_envs=2, **kwargs)
    assert native.agents == par.possible_agents
    for a in native.agents:
        assert native.observation_spaces[a] == par.observation_space(a)
        assert native.action_spaces[a] == par.action_space(a)
        assert native.obs_views[a].dim == par.observation_space(a).shape[0]
    assert native.state_space == par.unwrapped.state_space
    step = native.reset(seed=0)
    for a in native.agents:
        assert step.obs[a].shape == (2, native.obs_views[a].dim)
        assert step.obs[a].dtype == np.float32
        if kwargs.get("continuous_actions"):
            assert step.mask[a] is None and step.final_mask[a] is None
        else:
            assert step.mask[a].shape == (2, par.action_space(a).n) and step.mask[a].all()
            assert step.final_mask[a].all() and step.final_mask[a] is not step.mask[a]
    assert step.raw_obs is None and step.infos is None
    assert native.state().shape == (2, native.state_space.shape[0])
    par.close()


@pytest.mark.parametrize("native_cls,module,kwargs", [
    (Spread, simple_spread_v3, dict(N=3, max_cycles=6)),
    (SpeakerListener, simple_speaker_listener_v4, dict(max_cycles=6)),
])
def test_one_copy_follows_mpe2_seeding(native_cls, module, kwargs):
    """With one copy, reset(seed) draws the same episodes as mpe2's reset(seed), autoresets too."""
    par = module.parallel_env(**kwargs)
    obs, _ = par.reset(seed=42)
    native = native_cls(num_envs=1, **kwargs)
    step = native.reset(seed=42)
    rng = np.random.default_rng(0)
    for _ in range(3):  # three episodes: the later ones come from mpe2's unseeded resets
        for a in native.agents:
            np.testing.assert_allclose(step.obs[a][0], obs[a], atol=TOL, rtol=0)
        for _ in range(kwargs["max_cycles"]):
            acts = random_actions(native, rng, 1)
            par.step({a: mpe_action(native, a, acts[a][0]) for a in par.agents})
            step = native.step(acts)
        assert step.episode_end[0]
        obs, _ = par.reset()
    par.close()


def test_autoreset_and_final_obs():
    E, cycles = 4, 5
    short = Spread(num_envs=E, max_cycles=cycles)
    long = Spread(num_envs=E, max_cycles=cycles + 3)
    s_short, s_long = short.reset(seed=3), long.reset(seed=3)
    rng = np.random.default_rng(1)
    for t in range(cycles):
        acts = random_actions(short, rng, E)
        s_short, s_long = short.step(acts), long.step(acts)
        end = t == cycles - 1
        assert s_short.episode_end.all() == end and s_short.truncated.all() == end
        assert not s_short.truncated.any() or end
        assert not s_short.terminated.any() and not s_long.episode_end.any()
    for a in short.agents:
        # The last observation is what a longer episode sees at that step...
        np.testing.assert_array_equal(s_short.final_obs[a], s_long.obs[a])
        # ...while obs already holds the new episode's start: agents at rest.
        assert not np.array_equal(s_short.obs[a], s_short.final_obs[a])
        np.testing.assert_array_equal(s_short.obs[a][:, 0:2], 0.0)
        assert s_short.final_obs[a] is not s_short.obs[a]
    np.testing.assert_array_equal(
        short.state(), np.concatenate([s_short.obs[a] for a in short.agents], axis=1))
    # The next step starts counting the new episode.
    s_short = short.step(random_actions(short, rng, E))
    assert not s_short.episode_end.any() and not s_short.truncated.any()


def test_copies_that_end_alone_reset_alone():
    """A copy whose episode ends while the others run on is reset without disturbing them."""
    par = simple_spread_v3.parallel_env(max_cycles=25)
    par.reset(seed=4)
    raw = par.unwrapped
    for _ in range(23):
        par.step({a: 0 for a in par.agents})
    E = 4
    env, twin = Spread(num_envs=E), Spread(num_envs=E)
    env.reset(seed=8)
    twin.reset(seed=8)
    env.set_state_from_mpe(1, raw.world, raw.steps)  # copy 1 is two steps from its end
    rng = np.random.default_rng(5)
    for _ in range(2):
        acts = random_actions(env, rng, E)
        obs, *_ = par.step({a: int(acts[a][1]) for a in par.agents})
        step, twin_step = env.step(acts), twin.step(acts)
    assert step.episode_end.tolist() == [False, True, False, False]
    assert step.truncated.tolist() == [[False] * 3, [True] * 3, [False] * 3, [False] * 3]
    others = [0, 2, 3]
    for a in env.agents:
        np.testing.assert_allclose(step.final_obs[a][1], obs[a], atol=TOL, rtol=0)
        np.testing.assert_array_equal(step.obs[a][1, 0:2], 0.0)  # a new episode, at rest
        np.testing.assert_array_equal(step.obs[a][others], twin_step.obs[a][others])
    np.testing.assert_array_equal(step.reward[others], twin_step.reward[others])
    par.close()


def test_step_before_reset_is_an_error():
    env = SpeakerListener(num_envs=2)
    with pytest.raises(RuntimeError, match="reset"):
        env.step({a: np.zeros(2, np.int64) for a in env.agents})


@pytest.mark.parametrize("native_cls", [Spread, SpeakerListener])
def test_max_steps_cuts_episodes(native_cls):
    env = native_cls(num_envs=2, max_steps=3, max_cycles=25)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    ends = [bool(env.step(random_actions(env, rng, 2)).episode_end.all()) for _ in range(7)]
    assert ends == [False, False, True, False, False, True, False]
    env = native_cls(num_envs=2, max_steps=30, max_cycles=4)
    env.reset(seed=0)
    ends = [bool(env.step(random_actions(env, rng, 2)).truncated.all()) for _ in range(4)]
    assert ends == [False, False, False, True]


@pytest.mark.parametrize("native_cls,kwargs", [(Spread, dict(N=3)),
                                               (Spread, dict(continuous_actions=True)),
                                               (SpeakerListener, dict())])
def test_seeding_is_reproducible(native_cls, kwargs):
    def rollout(seed):
        env = native_cls(num_envs=5, max_cycles=4, **kwargs)
        step = env.reset(seed=seed)
        rng = np.random.default_rng(9)
        out = [np.concatenate([step.obs[a] for a in env.agents], axis=1).copy()]
        for _ in range(10):  # crosses two autoresets
            step = env.step(random_actions(env, rng, 5))
            out.append(np.concatenate([step.obs[a] for a in env.agents], axis=1).copy())
            out.append(step.reward.copy())
        return out

    a, b, c = rollout(123), rollout(123), rollout(124)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    assert not all(np.array_equal(x, z) for x, z in zip(a, c, strict=True))
    # Copies start from different states.
    assert not np.array_equal(a[0][0], a[0][1])


@pytest.mark.parametrize("native_cls,module,kwargs", [
    (Spread, simple_spread_v3, dict(N=3, local_ratio=0.3)),
    (Spread, simple_spread_v3, dict(N=3, continuous_actions=True)),
    (SpeakerListener, simple_speaker_listener_v4, dict()),
])
def test_copies_step_independently(native_cls, module, kwargs):
    par = module.parallel_env(**kwargs)
    par.reset(seed=2)
    world = par.unwrapped.world
    if native_cls is Spread:
        crowd(world, np.random.default_rng(2))
    big, one = native_cls(num_envs=8, **kwargs), native_cls(num_envs=1, **kwargs)
    big.reset(seed=0)
    one.reset(seed=1)
    big.set_state_from_mpe(0, world)
    one.set_state_from_mpe(0, world)
    rng = np.random.default_rng(3)
    for _ in range(30):
        acts = random_actions(big, rng, 8)
        s_big = big.step(acts)
        s_one = one.step({a: acts[a][:1] for a in big.agents})
        end = bool(s_one.episode_end[0])
        assert bool(s_big.episode_end[0]) == end
        for a in big.agents:
            got, want = (s_big.final_obs, s_one.final_obs) if end else (s_big.obs, s_one.obs)
            np.testing.assert_allclose(got[a][0], want[a][0], atol=1e-12, rtol=0)
        np.testing.assert_allclose(s_big.reward[0], s_one.reward[0], atol=1e-12, rtol=0)
        if end:
            break  # the next episodes of the two envs come from different seeds
    par.close()


@pytest.mark.parametrize("native_cls", [Spread, SpeakerListener])
def test_bad_arguments_are_named(native_cls):
    with pytest.raises(TypeError, match="bogus_arg"):
        native_cls(num_envs=2, bogus_arg=1)
    with pytest.raises(ValueError, match="num_envs"):
        native_cls(num_envs=0)
    with pytest.raises(ValueError, match="max_cycles"):
        native_cls(num_envs=2, max_cycles=0)


def test_bad_spread_values():
    with pytest.raises(ValueError, match="local_ratio"):
        Spread(num_envs=2, local_ratio=1.5)
    with pytest.raises(ValueError, match="N"):
        Spread(num_envs=2, N=0)
    with pytest.raises(TypeError, match="render_mode"):
        Spread(num_envs=2, render_mode="human")


def test_illegal_discrete_action_is_rejected():
    env = Spread(num_envs=3)
    env.reset(seed=0)
    acts = {a: np.zeros(3, np.int64) for a in env.agents}
    acts["agent_1"][2] = 5
    with pytest.raises(ValueError, match="agent_1"):
        env.step(acts)


def test_registered():
    assert native_env_class("spread") is Spread
    assert native_env_class("speaker_listener") is SpeakerListener


@pytest.mark.parametrize("cls", [Spread, SpeakerListener])
def test_a_native_step_promises_only_what_holds(cls):
    """No flag unless ``flagged``; every action legal and every agent acting, always."""
    env = cls(4, max_steps=7)
    rng = np.random.default_rng(2)
    step = env.reset(0)
    assert not step.flagged and step.all_legal and step.all_acting
    flagged = 0
    for t in range(30):
        step = env.step(random_actions(env, rng, 4))
        ends = step.episode_end.any() or step.truncated.any() or step.terminated.any()
        assert step.flagged == ends, f"step {t}"
        flagged += step.flagged
        assert step.acting.all() and all(m is None or m.all() for m in step.mask.values())
    assert flagged == 30 // 7
