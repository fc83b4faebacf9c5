import json

import pytest
from PIL import Image

from interplay.loggers.curve import curve_figure, plot_curve


def write_rows(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def assert_png(path):
    with Image.open(path) as img:
        assert img.format == "PNG"
        img.verify()
    with Image.open(path) as img:
        img.load()
        assert img.width > 100 and img.height > 100
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".")] == []


def row(phase, step, ret, **policies):
    return {"phase": phase, "env_steps": step, "episode_return_mean": ret,
            **{f"policy_return_mean/{k}": v for k, v in policies.items()}}


def test_normal_run(tmp_path):
    metrics = write_rows(tmp_path / "run-7" / "metrics.jsonl", [
        row("train", 100, None, red=None, blue=None),
        row("train", 200, 1.0, red=0.5, blue=0.5),
        row("test", 200, 1.5, red=1.0, blue=0.5),
        row("train", 300, 2.0, red=1.5, blue=0.5),
        row("test", 300, 2.5, red=2.0, blue=0.5),
    ])
    plot_curve(metrics, tmp_path / "run-7" / "curve.png")
    assert_png(tmp_path / "run-7" / "curve.png")


@pytest.mark.parametrize("rows", [
    [],
    [row("train", 50, 1.0, shared=1.0)],
    [row("test", 50, 1.0, shared=1.0), row("test", 90, 2.0, shared=2.0)],
    [row("train", 10, None)],
], ids=["empty", "one-row", "test-only", "no-returns"])
def test_sparse_runs_still_draw(tmp_path, rows):
    metrics = write_rows(tmp_path / "metrics.jsonl", rows)
    plot_curve(metrics, tmp_path / "curve.png")
    assert_png(tmp_path / "curve.png")


def test_replaces_an_existing_picture(tmp_path):
    (tmp_path / "curve.png").write_bytes(b"old")
    plot_curve(write_rows(tmp_path / "metrics.jsonl", [row("train", 1, 1.0)]),
               tmp_path / "curve.png")
    assert_png(tmp_path / "curve.png")


def test_malformed_line_is_named(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text(json.dumps(row("train", 1, 1.0)) + "\n\n" + '{"phase": "train", "env_ste\n')
    with pytest.raises(ValueError, match=rf"{metrics}:3: not valid JSON"):
        plot_curve(metrics, tmp_path / "curve.png")
    assert not (tmp_path / "curve.png").exists()
    metrics.write_text("[1, 2]\n")
    with pytest.raises(ValueError, match=rf"{metrics}:1: expected a JSON object"):
        plot_curve(metrics, tmp_path / "curve.png")


def selfplay_row(phase, step, edge, win=None):
    out = {"phase": phase, "env_steps": step, "episode_return_mean": 0.0,
           "policy_return_mean/shared": 0.0,
           "agent_return_mean/player_1": edge, "agent_return_mean/player_2": -edge}
    if win is not None:
        out["win_rate/player_1"] = win
    return out


def panels(fig):
    return {ax.get_title(): sorted(line.get_label() for line in ax.lines) for ax in fig.axes}


def test_zero_sum_self_play_shows_each_seat_and_the_win_rate(tmp_path):
    rows = [selfplay_row("train", 100, 0.2, 0.6), selfplay_row("train", 200, 0.5, 0.75),
            selfplay_row("test", 200, 1.0, 1.0)]
    got = panels(curve_figure(rows))
    assert got == {
        "mean return per policy": ["shared (test)", "shared (train)"],
        "mean return per agent (seat)": ["player_1 (test)", "player_1 (train)",
                                         "player_2 (test)", "player_2 (train)"],
        "win, draw and loss rates": ["win_rate/player_1 (test)", "win_rate/player_1 (train)"],
        "mean episode return (sum over agents)": ["test", "train"],
    }
    seat = next(ax for ax in curve_figure(rows).axes if "seat" in ax.get_title())
    train_line = next(line for line in seat.lines if line.get_label() == "player_2 (train)")
    assert list(train_line.get_ydata()) == [-0.2, -0.5]
    write_rows(tmp_path / "metrics.jsonl", rows)
    plot_curve(tmp_path / "metrics.jsonl", tmp_path / "curve.png")
    assert_png(tmp_path / "curve.png")


def test_one_policy_per_agent_and_no_win_rate_needs_no_more_panels():
    rows = [{"phase": "train", "env_steps": 10, "episode_return_mean": 1.0,
             "policy_return_mean/a": 0.4, "policy_return_mean/b": 0.6,
             "agent_return_mean/a": 0.4, "agent_return_mean/b": 0.6}]
    assert list(panels(curve_figure(rows))) == ["mean return per policy",
                                                "mean episode return (sum over agents)"]
