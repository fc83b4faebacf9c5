"""Bring your own PettingZoo env (docs/tutorial_own_env.md).

Checks examples/chase.py with interplay's env checker, shows three ways to map its agents to
policies, trains IPPO hunters against a scripted runner with custom metrics from a callback,
and scores them.

    python examples/own_env.py            # about a minute on a laptop
    python examples/own_env.py --smoke    # a few seconds: every step, a tiny budget
"""

from __future__ import annotations

import argparse
from pathlib import Path

import chase  # examples/chase.py: on the path when this script runs

import interplay
from interplay.envs.check import check_env
from interplay.experiment.evaluate import evaluate
from interplay.run.mapping import assign

HERE = Path(__file__).resolve().parent
RUNNER = {"agents": ["runner_0"], "type": "scripted", "fn": "chase:flee"}
MAPPINGS = {  # the same mapping, written three ways
    "lists": {"policies": {"hunters": {"agents": ["hunter_0", "hunter_1"]}, "runner": RUNNER}},
    "globs": {"policies": {"hunters": {"agents": ["hunter_*"]}, "runner": RUNNER}},
    "function": {"policies": {"runner": {"type": "scripted", "fn": "chase:flee"}},
                 "train": {"policy_mapping_fn": "chase:policy_of"}},
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smoke", action="store_true", help="a tiny budget, to check it all runs")
    p.add_argument("--run-dir", default="runs/chase", help="where to write the run folder")
    args = p.parse_args()

    # 1. Name the env for configs, and check it before training on it.
    interplay.register_env("my_chase", chase.Chase)
    problems = check_env(interplay.load_config(overrides=["env.id=my_chase"]),
                         cycles=50 if args.smoke else 500)
    if problems:
        raise SystemExit(f"fix the env first: {problems}")

    # 2. Three ways to say which policy controls which agent; all give the same mapping.
    agents = chase.Chase().possible_agents
    for form, extra in MAPPINGS.items():
        cfg = interplay.load_config(overrides=["env.id=my_chase"], base=extra)
        mapping = assign(agents, cfg.policies, cfg.train.policy_mapping_fn, cfg.train.self_play)
        print(f"{form:>8}: {dict(sorted(mapping.items()))}")

    # 3. Train the hunters against the scripted runner; CatchStats adds custom/* metrics.
    smoke = ["train.steps=3000", "train.test_frequency=1500", "train.test_episodes=10",
             "log.every=1500", "algo.rollout=32"] if args.smoke else []
    # The YAML names the env by its module (env.id: chase), so `interplay eval` and `resume`
    # can rebuild it later in another process, where "my_chase" is not registered.
    cfg = interplay.load_config([HERE / "chase.yaml"], overrides=["log.console=false", *smoke])
    result = interplay.train(cfg, args.run_dir, overwrite=True)
    test = result.last_test
    print(f"test: hunters' return {test['policy_return_mean/hunters']:.2f}, caught in "
          f"{test['custom/caught']:.0%} of episodes, after {test['episode_len_mean']:.1f} steps")

    # 4. Score the trained hunters again, greedily, on fresh episodes.
    report = evaluate(args.run_dir, episodes=20 if args.smoke else 200)
    print(f"eval: hunters' return {report['policy_return_mean/hunters']:.2f} over "
          f"{report['episodes']} episodes")


if __name__ == "__main__":
    main()
