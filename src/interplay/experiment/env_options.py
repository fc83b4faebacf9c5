"""What each episode of an env varied per episode drew, kept beside its return.

With distributions in ``env.reset_options`` or ``env.kwargs``, every finished training episode
of an in-process copy adds one line to ``env_options.jsonl`` (its id, copy, the run's env steps
when it ended, its return summed over agents, and the values it drew); with ``log.split_by``,
reports (train and test) add the mean return per drawn value of that key. The lines written
are counted in the checkpoint, so a resumed run drops those written after it and goes on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from interplay.envs.variation import VariedEnv
from interplay.run.callbacks import Callbacks

FILE = "env_options.jsonl"
SPLIT_DOCS = {
    "split/<key>=<value>/episode_return": "with `log.split_by: <key>`: the mean return (summed "
                                          "over agents) of the report's episodes that drew "
                                          "that value of the env option or kwarg",
}


class EnvOptionsLog(Callbacks):
    """Records each episode's drawn env options; splits returns by one of them."""

    def __init__(self, run_dir: Path, split_by: str | None):
        self.path = Path(run_dir) / FILE
        self.split_by = split_by
        self.lines = 0
        # What each training copy's episode under way drew, by copy: saved in checkpoints,
        # since a resumed episode is not reset again and cannot be asked.
        self.under_way: dict[str, dict[str, Any]] = {}

    def on_env_created(self, *, env: Any, env_index: int, runner: Any) -> None:
        if not isinstance(env, VariedEnv):
            return

        def choose(episodes: list[dict[str, Any]]) -> dict[str, Any] | None:
            if not _training(runner):  # test phases and videos play the drawn values
                return None
            return runner.callbacks.next_env_options(env_index=env_index, episodes=episodes,
                                                     runner=runner)

        env.chooser = choose

    def on_episode_start(self, *, episode: Any, env_index: int, runner: Any) -> None:
        drawn = getattr(episode.env, "drawn", None)  # the copy has just reset: this episode's
        if drawn is None:
            return
        episode.user_data["env_options"] = dict(drawn)
        if _training(runner):
            self.under_way[str(env_index)] = dict(drawn)

    def on_episode_end(self, *, episode: Any, env_index: int, runner: Any) -> None:
        training = _training(runner)
        options = (self.under_way.get(str(env_index)) if training
                   else episode.user_data.get("env_options"))
        if options is None:
            return
        total = float(sum(episode.returns.values()))
        if self.split_by is not None and self.split_by in options:
            episode.add_metric(f"split/{self.split_by}={options[self.split_by]}/episode_return",
                               total)
        if not training:
            return
        line = {"episode": episode.id, "copy": env_index, "env_steps": runner.env_steps,
                "return": total, "options": options}
        with open(self.path, "a") as fh:
            fh.write(json.dumps(line) + "\n")
        self.lines += 1

    def state_dict(self) -> dict[str, Any]:
        return {"lines": self.lines, "under_way": self.under_way}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.lines = int(state.get("lines", 0))
        self.under_way = dict(state.get("under_way", {}))
        if self.path.exists():  # lines written after the checkpoint are written again
            kept = self.path.read_text().splitlines(keepends=True)[:self.lines]
            self.path.write_text("".join(kept))


def _training(runner: Any) -> bool:
    """Whether ``runner`` is the run's training runner (not a test phase's, nor a video's)."""
    experiment = getattr(runner, "experiment", None)
    return experiment is not None and runner is experiment.runner
