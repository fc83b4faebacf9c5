"""IPPO training env-steps/s of interplay against RLlib's PPO, measured in the same run.

    python benchmarks/compare_rllib.py [--steps 65536] [--batch 16384] [--envs 16] [--runners 0]

Both train one policy shared by the three agents of mpe2's ``simple_spread_v3`` (discrete
actions, 25 steps an episode) with separate [64, 64] ReLU actor and critic networks, ``--batch``
env steps per update, two epochs of eight minibatches and one torch thread; both step
``--envs`` copies in one process. RLlib samples in the driver by default (``--runners 0``),
which on two cores beat one remote env runner: PPO waits for its samples, so a second process
only adds the transfer. interplay then also trains on native ``spread`` with the
``--config`` preset. Each rate is timed from the end of the first update or report, so set-up
and start-up are left out. An env step is one step of one copy. Prints one JSON line; without
``ray[rllib]`` (the ``compare-rllib`` extra) it prints a ``skipped`` line and exits 0.
"""

from __future__ import annotations

import os
import time

from ippo_speed import compare, rate_between

EPOCHS, MINIBATCHES, HIDDEN = 2, 8, [64, 64]


def rllib_speed(steps: int, batch: int, envs: int, runners: int, seed: int) -> float:
    """Env steps/s of RLlib PPO on mpe2's simple_spread_v3, from its first update on."""
    import ray
    from mpe2 import simple_spread_v3
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv
    from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME
    from ray.tune.registry import register_env

    def make_env(_: dict) -> ParallelPettingZooEnv:
        return ParallelPettingZooEnv(
            simple_spread_v3.parallel_env(max_cycles=25, continuous_actions=False))

    agent_rows = batch * 3  # one shared module learns from all three agents' steps
    config = (
        PPOConfig()
        .environment("mpe2_simple_spread")
        .framework("torch")
        .env_runners(num_env_runners=runners, num_envs_per_env_runner=envs,
                     num_cpus_per_env_runner=1)
        .learners(num_learners=0)
        .multi_agent(policies={"shared"}, policy_mapping_fn=lambda agent, *_, **__: "shared")
        .rl_module(model_config=DefaultModelConfig(
            fcnet_hiddens=HIDDEN, fcnet_activation="relu", vf_share_layers=False))
        .training(train_batch_size_per_learner=batch, minibatch_size=agent_rows // MINIBATCHES,
                  num_epochs=EPOCHS, lr=1e-3, gamma=0.99, lambda_=0.95, clip_param=0.2,
                  entropy_coeff=0.01, vf_loss_coeff=0.5, grad_clip=0.5)
        .debugging(seed=seed)
    )
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    try:
        register_env("mpe2_simple_spread", make_env)
        algo = config.build_algo()
        marks = []
        while not marks or marks[-1][0] < steps:
            sampled = algo.train()[ENV_RUNNER_RESULTS][NUM_ENV_STEPS_SAMPLED_LIFETIME]
            marks.append((sampled, time.perf_counter()))
        algo.stop()
    finally:
        ray.shutdown()
    return rate_between(marks)


def main() -> None:
    compare("rllib", "ray", "ray.rllib", 16,
            lambda a: rllib_speed(a.steps, a.batch, a.envs, a.runners, a.seed),
            lambda p: p.add_argument("--runners", type=int, default=0,
                                     help="RLlib env runners (0: the driver)"))

if __name__ == "__main__":
    main()
