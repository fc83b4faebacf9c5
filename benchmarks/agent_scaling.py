"""Agent-steps per second through interplay over a bare PettingZoo loop, as agents grow.

    python benchmarks/agent_scaling.py [--env interplay.envs.swarm] [--agents 10 100 500]
                                       [--agents-kwarg n_agents] [--kwargs '{}']
                                       [--fixed magent2.environments.battle_v4 ...]

One JSON line per agent count and mode, on any Parallel env whose constructor takes the
number of agents (``--agents-kwarg``), then on envs with a fixed number of agents (``--fixed``:
magent2's ``battle_v4`` by default, 162 agents in one copy). Modes: ``random`` (the runner
with uniform random actions, nothing learned), ``random_collecting`` (the same, booking every transition as a
learner would), ``ippo_sampling`` and ``dqn_sampling`` (the learner's networks acting, transitions booked, no
update) and ``ippo_train`` (a whole ``interplay.train`` run, updates included). Each is set against the
lean bare loop (all actions of a step drawn with one NumPy call, handed over with
``dict(zip(agents, actions))``) and the loop PettingZoo's docs write
(``env.action_space(agent).sample()`` per agent), measured in the same process, interleaved
over rounds; ``ratio`` is interplay's rate over the lean loop's (1.0 = interplay adds nothing),
``ratio_vs_docs_loop`` over the docs loop's.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from functools import partial

import torch
from runner_overhead import bare_parallel, runner_loop

from interplay import config, train
from interplay.envs.registry import env_factory
from interplay.experiment.build import make_actors, make_algorithm, make_specs, make_vec_env
from interplay.run.runner import Runner

ROUNDS = 3
SEED = 0
IPPO = {"name": "ippo", "rollout": 32, "epochs": 2, "minibatches": 2}
DQN = {"name": "dqn", "learning_starts": 10**9}  # acts and books every transition, never updates
BATTLE = "magent2.environments.battle_v4"  # 162 agents in one copy, 13x13x5 observations


def sampling(algo: dict, env_id: str, kwargs: dict, steps: int) -> float:
    """Env-steps/s of a learner's networks acting, every transition booked, no update."""
    cfg = config.validate({"env": {"id": env_id, "kwargs": kwargs}, "algo": algo,
                           "train": {"device": "cpu"}})
    torch.set_num_threads(cfg.train.torch_threads)  # as a training run sets it
    env, copies = make_vec_env(cfg)
    specs = make_specs(cfg, env)
    actors = make_actors(cfg, specs, make_algorithm(cfg, specs, "cpu", env.turn_based))
    runner = Runner(env, specs, actors, set(specs), copies=copies)
    runner.reset(SEED)
    start = time.perf_counter()
    while runner.env_steps < steps:
        runner.step()
    rate = runner.env_steps / (time.perf_counter() - start)
    env.close()
    return rate


def ippo_train(env_id: str, kwargs: dict, steps: int) -> float:
    cfg = config.validate({
        "env": {"id": env_id, "kwargs": kwargs}, "algo": IPPO,
        "train": {"steps": steps, "seed": SEED, "device": "cpu"},
        "log": {"console": False, "tensorboard": False, "curve": False, "every": steps},
        "checkpoint": {"at_end": False},
    })
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        result = train(cfg, tmp)
        return result.env_steps / (time.perf_counter() - start)


def measure(env_id: str, kwargs: dict, modes: list[str]) -> None:
    make = env_factory(env_id, kwargs, "parallel")
    probe = make()
    agents = len(probe.possible_agents)
    probe.close()
    steps = max(400, 200_000 // agents)
    runs = {
        "random": partial(runner_loop, env_id, "parallel", False, kwargs, steps),
        "random_collecting": partial(runner_loop, env_id, "parallel", True, kwargs, steps),
        "ippo_sampling": partial(sampling, IPPO, env_id, kwargs, steps),
        "dqn_sampling": partial(sampling, DQN, env_id, kwargs, steps),
        "ippo_train": partial(ippo_train, env_id, kwargs, steps),
    }
    rates: dict[str, list[float]] = {m: [] for m in ["docs", "lean", *modes]}
    for _ in range(ROUNDS):
        rates["docs"].append(bare_parallel(make, True, steps))
        rates["lean"].append(bare_parallel(make, False, steps))
        for m in modes:
            rates[m].append(runs[m]())
    docs, lean = statistics.median(rates["docs"]), statistics.median(rates["lean"])
    for m in modes:
        ours = statistics.median(rates[m])
        print(json.dumps({
            "benchmark": "agent_scaling", "env": env_id, "agents": agents, "mode": m,
            "env_steps": steps, "rounds": ROUNDS,
            "agent_steps_per_s": round(ours * agents, 1),
            "bare_lean_agent_steps_per_s": round(lean * agents, 1),
            "bare_docs_agent_steps_per_s": round(docs * agents, 1),
            "ratio": round(ours / lean, 3), "ratio_vs_docs_loop": round(ours / docs, 3),
        }), flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--env", default="interplay.envs.swarm", help="a PettingZoo Parallel env module")
    p.add_argument("--agents", type=int, nargs="+", default=[10, 100, 500])
    p.add_argument("--agents-kwarg", default="n_agents",
                   help="the constructor argument that sets the number of agents")
    p.add_argument("--kwargs", default="{}", help="other constructor arguments, as JSON")
    p.add_argument("--modes", nargs="+", default=[
        "random", "random_collecting", "ippo_sampling", "dqn_sampling", "ippo_train"])
    p.add_argument("--fixed", nargs="*", default=[BATTLE], metavar="ENV",
                   help="Parallel envs with a fixed number of agents, measured after the --env "
                        f"counts as they are built (default {BATTLE}: 162 agents; e.g. "
                        "magent2.environments.gather_v5 for 495)")
    p.add_argument("--no-battle", action="store_true", help="measure no --fixed env")
    args = p.parse_args()
    for n in args.agents:
        measure(args.env, {**json.loads(args.kwargs), args.agents_kwarg: n}, args.modes)
    for env_id in [] if args.no_battle else args.fixed:
        measure(env_id, {}, args.modes)


if __name__ == "__main__":
    main()
