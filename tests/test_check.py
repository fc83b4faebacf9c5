"""``interplay check``: named problems for broken envs, a pass for valid unusual ones."""

from __future__ import annotations

import pytest

from interplay.cli import main


def check(capsys, env_id, *extra):
    code = main(["check", env_id, "--cycles", "40", *extra])
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return code, out.out


@pytest.mark.parametrize("env_id", [
    "broken_envs:info_masked",  # legal actions in info["action_mask"]; illegal ones raise
    "broken_envs:mixed_spaces",  # the same, among Box, MultiDiscrete and Dict spaces
    "broken_envs:quiet_arrivals",  # Parallel: agents arrive mid-episode with obs and info only
    "broken_envs:late_joiner",  # AEC: an agent joins mid-episode
    "interplay.envs.toy:shifting_crowd",
])
def test_valid_envs_pass(capsys, env_id):
    code, out = check(capsys, env_id)
    assert code == 0, out
    assert "FAIL" not in out and "passed the PettingZoo API test and interplay's checks" in out


def test_a_mask_in_info_of_the_wrong_length_names_the_agent_and_both_lengths(capsys):
    code, out = check(capsys, "broken_envs:info_masked", "-s", "env.kwargs.width=2")
    assert code == 1
    for agent in ("a_0", "a_1"):
        assert f"action_mask of '{agent}' has 2 entries, its action space Discrete(3) needs 3" in out


def test_a_mask_in_the_observation_of_the_wrong_length_is_named(capsys):
    code, out = check(capsys, "broken_envs:long_mask")
    assert code == 1
    assert ("the observation space of 'player_0' declares an action_mask of 4 entries, its "
            "action space Discrete(3) needs 3") in out


def test_each_distinct_warning_is_shown_once_with_its_count(capsys):
    code, out = check(capsys, "broken_envs:chatty")
    assert code == 0
    lines = [line for line in out.splitlines() if "render_mode is None" in line]
    assert lines == ["warn  while stepping the env: render_mode is None: nothing will be drawn "
                     "(40 times)"]
    code, out = check(capsys, "broken_envs:late_joiner")
    warned = [line for line in out.splitlines() if line.startswith("warn")]
    assert warned and len(warned) == len(set(warned))


def test_image_observations_that_never_change_are_named_with_the_render_mode_fix(capsys):
    code, out = check(capsys, "broken_envs:undrawn_frames")
    assert code == 1
    assert ("the image observation of 'eye_0' (and 1 other agent) stayed the same picture "
            "through every episode (35 steps of random actions)") in out
    assert "-s env.kwargs.render_mode=rgb_array" in out
    code, out = check(capsys, "broken_envs:undrawn_frames", "-s", "env.kwargs.drawn=true")
    assert code == 0, out


def test_pistonball_without_a_render_mode_is_caught_showing_the_same_frame(capsys):
    pytest.importorskip("pettingzoo.butterfly")
    env = "pettingzoo.butterfly.pistonball_v6"
    code, out = check(capsys, env, "-s", "env.kwargs.n_pistons=3")
    assert code == 1 and "'piston_0' (and 2 other agents) stayed the same picture" in out
    code, out = check(capsys, env, "-s", "env.kwargs.n_pistons=3", "-s",
                      "env.kwargs.render_mode=rgb_array")
    assert code == 0, out


def test_an_env_that_raises_while_checked_is_a_problem_not_a_crash(capsys):
    code, out = check(capsys, "faulty_envs:flaky_counter", "-s", "env.kwargs.p=1.0")
    assert code == 1 and "the env raised RuntimeError: flaky step" in out


@pytest.mark.parametrize("cycles", ["0", "-3"])
def test_check_refuses_a_number_of_cycles_that_tries_nothing(cycles, capsys):
    from interplay.cli import main

    code = main(["check", "mpe2.simple_spread_v3", "--cycles", cycles])
    out, err = capsys.readouterr()
    assert code == 2 and f"--cycles must be at least 1 (env steps to try), got {cycles}" in err
    assert "passed" not in out
