"""Policy mapping: default groups, ids, globs, functions, self-play, and its errors."""

from __future__ import annotations

import pytest
from gymnasium import spaces
from helpers import CLI_QUIET

from interplay.config.schema import PolicyConfig
from interplay.envs.spaces import action_view, obs_view
from interplay.errors import ConfigError
from interplay.run.mapping import assign, build_specs, group_of

AGENTS = ["bob_0", "bob_1", "fred_0", "fred_1", "solo"]


def by_agent(pid_of_bob_1: str):  # a policy_mapping_fn for the tests
    return pid_of_bob_1.split("_")[0].upper()


def test_default_groups_use_the_prefix_before_the_last_underscore():
    assert group_of("red_team_3") == "red_team" and group_of("solo") == "solo"
    assert assign(AGENTS, {}, None, False) == {
        "bob_0": "bob", "bob_1": "bob", "fred_0": "fred", "fred_1": "fred", "solo": "solo"}


def test_ids_and_globs_and_precedence():
    got = assign(AGENTS, {
        "one": PolicyConfig(agents=["bob_1"]),
        "rest": PolicyConfig(agents=["bob_*", "fred_*", "solo"]),
    }, None, False)
    assert got["bob_1"] == "one" and got["bob_0"] == "rest" and got["solo"] == "rest"


def test_mapping_function_covers_the_agents_left_over():
    got = assign(AGENTS, {"mine": PolicyConfig(agents=["solo"])}, f"{__name__}:by_agent", False)
    assert got == {"bob_0": "BOB", "bob_1": "BOB", "fred_0": "FRED", "fred_1": "FRED", "solo": "mine"}


def test_self_play_puts_one_policy_on_every_seat():
    assert set(assign(AGENTS, {}, None, True).values()) == {"shared"}


@pytest.mark.parametrize(("policies", "needle"), [
    ({"a": PolicyConfig(agents=["bob_*"])}, "['fred_0', 'fred_1', 'solo'] are controlled by no policy"),
    ({"a": PolicyConfig(agents=["bob_*"]), "b": PolicyConfig(agents=["b*"])}, "matches the patterns"),
    ({"a": PolicyConfig(agents=["bobby"])}, "'bobby' is not an agent"),
    ({"a": PolicyConfig(agents=["zz_*"]), "b": PolicyConfig(agents=["*"])}, "matches no agent"),
    ({"ghost": PolicyConfig()}, "policies.ghost controls no agent"),
])
def test_mapping_errors_name_what_is_wrong(policies, needle):
    with pytest.raises(ConfigError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        assign(AGENTS, policies, None, False)


def test_one_policy_over_different_spaces_is_refused_naming_both():
    agents = ["x_0", "x_1"]
    obs = {"x_0": spaces.Box(0, 1, (3,)), "x_1": spaces.Box(0, 1, (4,))}
    act = {a: spaces.Discrete(2) for a in agents}
    with pytest.raises(ConfigError, match=r"'x_0' has Box.*'x_1' has Box"):
        build_specs(agents, obs, act, {a: obs_view(s, a) for a, s in obs.items()},
                    {a: action_view(s, a) for a, s in act.items()}, {"x": PolicyConfig(agents=["x_*"])})


def test_a_default_group_with_different_spaces_splits_per_agent():
    agents = ["x_0", "x_1", "y_0"]
    obs = {"x_0": spaces.Box(0, 1, (3,)), "x_1": spaces.Box(0, 1, (4,)), "y_0": spaces.Box(0, 1, (4,))}
    act = {a: spaces.Discrete(2) for a in agents}
    views = ({a: obs_view(s, a) for a, s in obs.items()}, {a: action_view(s, a) for a, s in act.items()})
    with pytest.warns(UserWarning, match="each gets its own policy"):
        specs = build_specs(agents, obs, act, *views, {})
    assert {pid: s.agents for pid, s in specs.items()} == {"x_0": ("x_0",), "x_1": ("x_1",), "y": ("y_0",)}
    with pytest.raises(ConfigError, match="different observation spaces"):
        build_specs(agents, obs, act, *views, {"x": PolicyConfig()})


def rllib_style(agent_id, episode, **kwargs):
    assert episode.id_ >= 1 and episode.rng is not None
    return agent_id.split("_")[0].upper()


def old_rllib_style(agent_id, episode, worker, **kwargs):
    return agent_id.split("_")[0].upper()


def star_args(agent_id, *args, **kwargs):
    return agent_id.split("_")[0].upper()


def episode_by_keyword(agent_id, *, episode, **kwargs):
    return agent_id.split("_")[0].upper()


def optional_episode(agent_id, episode=None, worker=None):
    return agent_id.split("_")[0].upper()


def only_star(*args, **kwargs):
    return args[0].split("_")[0].upper()


def needs_team_size(agent_id, team_size):
    return agent_id


def needs_keyword(agent_id, *, config):
    return agent_id


def no_arguments():
    return "x"


def crashes(agent_id, episode, **kwargs):
    return episode.policy_for(agent_id)


@pytest.mark.parametrize("fn", [
    "rllib_style", "old_rllib_style", "star_args", "episode_by_keyword", "optional_episode",
    "only_star",
])
def test_mapping_functions_in_every_accepted_signature(fn):
    got = assign(AGENTS, {"mine": PolicyConfig(agents=["solo"])}, f"{__name__}:{fn}", False)
    assert got == {"bob_0": "BOB", "bob_1": "BOB", "fred_0": "FRED", "fred_1": "FRED", "solo": "mine"}


@pytest.mark.parametrize(("fn", "needle"), [
    ("needs_team_size", "requires argument(s) team_size that the mapping cannot give"),
    ("needs_keyword", "requires argument(s) config that the mapping cannot give"),
    ("no_arguments", "takes no positional argument"),
    ("crashes", "raised for agent 'bob_0' at the start of episode 1 (copy 0): AttributeError"),
])
def test_a_mapping_function_we_cannot_call_is_named(fn, needle):
    with pytest.raises(ConfigError) as info:
        assign(AGENTS, {}, f"{__name__}:{fn}", False)
    assert f"train.policy_mapping_fn '{__name__}:{fn}'" in str(info.value)
    assert needle in str(info.value)


def test_an_rllib_style_mapping_function_trains_from_the_cli(tmp_path, capsys):
    from interplay.cli import main

    code = main(["train", "-s", "train.steps=30", *CLI_QUIET,
                 "-s", f"train.policy_mapping_fn={__name__}:rllib_style",
                 "--run-dir", str(tmp_path / "r")])
    assert code == 0, capsys.readouterr().err
    assert (tmp_path / "r" / "metrics.jsonl").read_text().count("policy_return_mean/AGENT") > 0
