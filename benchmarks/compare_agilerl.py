"""IPPO training env-steps/s of interplay against AgileRL's IPPO, measured in the same run.

    python benchmarks/compare_agilerl.py [--steps 65536] [--batch 16384] [--envs 8]

Both train one policy shared by the three agents of mpe2's ``simple_spread_v3`` (discrete
actions, 25 steps an episode) with ``--batch`` env steps per update, two epochs of eight
minibatches, ReLU networks and one torch thread. AgileRL steps ``--envs`` copies in its
``AsyncPettingZooVecEnv`` (one worker process per copy), the set-up its docs show; interplay
steps as many copies in its own process. AgileRL's networks are an encoder and a head with at
least one hidden layer each, so the nearest to interplay's [64, 64] is 64 -> latent 64 -> 64.
AgileRL is driven by a plain collect-then-learn loop over its public ``get_action`` and
``learn`` (no evaluation or evolution steps, which its own training function adds). interplay
then also trains on native ``spread`` with the ``--config`` preset. Each rate is timed from
the end of the first update or report, so set-up is left out. An env step is one step of one
copy. Prints one JSON line; without ``agilerl`` (the ``compare-agilerl`` extra) it prints a
``skipped`` line and exits 0.
"""

from __future__ import annotations

import time

import numpy as np
from ippo_speed import compare, rate_between

EPOCHS, MINIBATCHES = 2, 8
NET = {"latent_dim": 64, "encoder_config": {"hidden_size": [64], "activation": "ReLU"},
       "head_config": {"hidden_size": [64], "activation": "ReLU"}}


def agilerl_speed(steps: int, batch: int, envs: int, seed: int) -> float:
    """Env steps/s of AgileRL's IPPO on mpe2's simple_spread_v3, from its first update on."""
    from agilerl.algorithms import IPPO
    from agilerl.vector.pz_async_vec_env import AsyncPettingZooVecEnv
    from mpe2 import simple_spread_v3

    def make_env() -> object:
        return simple_spread_v3.parallel_env(max_cycles=25, continuous_actions=False)

    vec = AsyncPettingZooVecEnv([make_env] * envs)
    try:
        ids = list(vec.possible_agents)
        agent = IPPO(
            observation_spaces=[vec.single_observation_space(a) for a in ids],
            action_spaces=[vec.single_action_space(a) for a in ids], agent_ids=ids,
            net_config=NET, batch_size=len(ids) * batch // MINIBATCHES, lr=1e-3,
            learn_step=batch, update_epochs=EPOCHS, gamma=0.99, gae_lambda=0.95,
            clip_coef=0.2, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5)
        obs, info = vec.reset(seed=seed)
        done = {a: np.zeros(envs) for a in ids}
        sampled, marks = 0, []
        while len(marks) < 2 or sampled < steps:
            fields = [{a: [] for a in ids} for _ in range(6)]
            for _ in range(batch // envs):
                action, log_prob, _, value = agent.get_action(obs=obs, infos=info)
                next_obs, reward, terminated, truncated, info = vec.step(action)
                for a in ids:
                    for field, v in zip(fields, (obs, action, log_prob, reward, done, value),
                                        strict=True):
                        field[a].append(v[a])
                done = {a: np.logical_or(terminated[a], truncated[a]).astype(np.float32)
                        for a in ids}
                obs = next_obs
                sampled += envs
            states, actions, log_probs, rewards, dones, values = fields
            agent.learn((states, actions, log_probs, rewards, dones, values, obs, done))
            marks.append((sampled, time.perf_counter()))
    finally:
        vec.close()
    return rate_between(marks)


def main() -> None:
    compare("agilerl", "agilerl", "agilerl.algorithms", 8,
            lambda a: agilerl_speed(a.steps, a.batch, a.envs, a.seed))

if __name__ == "__main__":
    main()
