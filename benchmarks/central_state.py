"""What a centralised critic's input takes in memory, on the env's state or on the observations.

    python benchmarks/central_state.py [--agents 3 30] [--image-agents 2 8] [--steps 24]

Two parts, one JSON line per case:

* ``stored``: MAPPO and MADDPG on ``interplay.envs.toy:hidden_goal`` (k agents; its state is
  3 + k numbers) with ``algo.state: env`` and ``observations``, ``--steps`` steps of 4 copies
  collected and no update. Figures per (step, copy): ``state_bytes`` the env's state as stored
  (MAPPO: the rollout's table of states, state and next state sharing rows; MADDPG: the joint
  rows' state and next state), ``joined_obs_bytes`` what the joint observation of the k agents
  takes (MAPPO builds that table at each update; MADDPG's joint rows hold it as the agents'
  own columns), and ``per_row_state_bytes`` what a state and next state copied into every
  agent's row would take.
* ``image``: MAPPO on 42×42 RGB frames (ColorMatch with a global state of n_colors + 1 numbers:
  the share of agents shown each colour, and the time), k agents, 4 copies, two updates, each
  run in a fresh process: its peak RSS, and the bytes of the rollout's table of states
  (``state_table_bytes``) or of the joint-observation table an update builds
  (``joined_obs_table_bytes``).
* ``critic``: MADDPG and MASAC on HiddenGoal (2 agents, 8 copies), whose goal only the env's
  state holds: the critics' TD loss at each of four reports, on the state or on the
  observations (a learning check too slow for the test suite).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from gymnasium import spaces

from interplay.envs.toy.pixels import ColorMatch

GOAL = "interplay.envs.toy:hidden_goal"
QUIET = {"console": False, "tensorboard": False, "curve": False}


class SceneState(ColorMatch):
    """ColorMatch with a global state: the share of agents shown each colour, and the time."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.state_space = spaces.Box(0.0, 1.0, (self.n_colors + 1,), np.float32)

    def state(self) -> np.ndarray:
        share = np.bincount(self.colors, minlength=self.n_colors) / len(self.colors)
        return np.append(share, self.t / self.max_cycles).astype(np.float32)


def stored(algo: str, agents: int, state: str, steps: int) -> dict:
    """Bytes per (step, copy) of what the critics read, after ``steps`` steps of 4 copies."""
    from interplay import config
    from interplay.experiment.loop import Experiment

    E = 4
    settings = ({"name": "mappo", "rollout": steps + 8} if algo == "mappo" else
                {"name": "maddpg", "learning_starts": 10**9, "buffer_size": steps * E})
    cfg = config.validate({"env": {"id": GOAL, "num_envs": E, "kwargs": {"n_agents": agents}},
                           "algo": {**settings, "state": state},
                           "train": {"steps": steps * E, "device": "cpu",
                                     "test_frequency": -1},
                           "log": QUIET, "checkpoint": {"at_end": False}})
    with tempfile.TemporaryDirectory() as tmp:
        exp = Experiment(cfg, Path(tmp) / "run")
        try:
            exp.run()
            if algo == "mappo":
                held = exp.storage.states.nbytes
            else:
                held = sum(col.nbytes for col in exp.storage.buffer.states.values())
        finally:
            exp.close()
    dim = 3 + agents
    return {"benchmark": "central_state", "part": "stored", "algo": algo, "agents": agents,
            "state": state, "steps": steps, "num_envs": E, "state_dim": dim,
            "state_bytes": held / (steps * E),
            "joined_obs_bytes": agents * 1 * 4,
            "per_row_state_bytes": agents * 2 * dim * 4}


CHILD = r"""
import json, resource, sys
sys.path.insert(0, sys.argv[2])
from central_state import SceneState
from interplay import config, register_env
from interplay.experiment.loop import Experiment
register_env("scene_state", SceneState)
spec = json.loads(sys.argv[1])
exp = Experiment(config.validate(spec["cfg"]), spec["run_dir"])
algo = exp.algo.of("eye")
tables = []
update = algo.update

def watched(storage):  # the critic's table of this rollout, as the update reads it
    tables.append(storage.states.nbytes if algo.env_state is not None else
                  storage.steps * storage.num_envs * algo.joint_dim)
    return update(storage)

algo.update = watched
try:
    exp.run()
finally:
    exp.close()
print(json.dumps({"table_bytes": max(tables),
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def image(agents: int, state: str, rollout: int) -> dict:
    E = 4
    cfg = {"env": {"id": "scene_state", "num_envs": E, "kwargs": {"n_agents": agents}},
           "algo": {"name": "mappo", "state": state, "rollout": rollout, "epochs": 1,
                    "minibatches": 4},
           "train": {"steps": 2 * rollout * E, "device": "cpu", "test_frequency": -1},
           "log": QUIET, "checkpoint": {"at_end": False}}
    with tempfile.TemporaryDirectory() as tmp:
        spec = {"cfg": cfg, "run_dir": str(Path(tmp) / "run")}
        done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec),
                               str(Path(__file__).resolve().parent)],
                              capture_output=True, text=True, check=True)
    got = json.loads(done.stdout.strip().splitlines()[-1])
    key = "state_table_bytes" if state == "env" else "joined_obs_table_bytes"
    return {"benchmark": "central_state", "part": "image", "algo": "mappo", "agents": agents,
            "state": state, "rollout": rollout, "num_envs": E, "frame_bytes": 42 * 42 * 3,
            key: got["table_bytes"], "peak_rss_bytes": got["peak_rss_bytes"]}


def critic(algo: str, state: str, steps: int) -> dict:
    """How well the critics of ``algo`` learn HiddenGoal's returns, whose goal only the state
    holds: their TD loss in the last report (the actors see no goal, so returns barely move)."""
    from interplay import config, train

    cfg = config.validate({"env": {"id": GOAL, "num_envs": 8},
                           "algo": {"name": algo, "state": state, "learning_starts": 200,
                                    "batch_size": 128, "gamma": 0.9},
                           "train": {"steps": steps, "device": "cpu", "test_frequency": -1},
                           "log": {**QUIET, "every": steps // 4}, "checkpoint": {"at_end": False}})
    with tempfile.TemporaryDirectory() as tmp:
        rows = [r for r in train(cfg, Path(tmp) / "run").rows if "critic_loss/agent" in r]
    return {"benchmark": "central_state", "part": "critic", "algo": algo, "state": state,
            "env_steps": steps, "critic_loss": [round(r["critic_loss/agent"], 3) for r in rows],
            "episode_return_mean": rows[-1]["episode_return_mean"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--agents", type=int, nargs="*", default=[3, 30])
    p.add_argument("--image-agents", type=int, nargs="*", default=[2, 8])
    p.add_argument("--steps", type=int, default=24)
    p.add_argument("--rollout", type=int, default=32)
    p.add_argument("--critic-algos", nargs="*", default=["maddpg", "masac"])
    p.add_argument("--critic-steps", type=int, default=4000)
    args = p.parse_args()
    for algo in ("mappo", "maddpg"):
        for agents in args.agents:
            for state in ("env", "observations"):
                print(json.dumps(stored(algo, agents, state, args.steps)), flush=True)
    for agents in args.image_agents:
        for state in ("env", "observations"):
            print(json.dumps(image(agents, state, args.rollout)), flush=True)
    for algo in args.critic_algos:
        for state in ("env", "observations"):
            print(json.dumps(critic(algo, state, args.critic_steps)), flush=True)


if __name__ == "__main__":
    main()
