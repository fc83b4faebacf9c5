import sys

import interplay

steps = 20_000 if "--smoke" in sys.argv else 1_000_000  # --smoke: the quick check CI runs
cfg = interplay.load_config(overrides=[                  # or load_config(["my.yaml", ...])
    "env.id=spread",              # built-in simple_spread; or mpe2.simple_spread_v3, any module
    "env.num_envs=128",           # copies stepped together
    "algo.name=mappo",            # ippo, mappo, a2c, dqn, vdn, qmix, maddpg, matd3, isac, masac, random, or module:Class
    f"train.steps={steps}",       # env steps, all copies together
    f"train.test_frequency={steps // 2}",
    "train.test_episodes=100",
    "log.console=false",
])
result = interplay.train(cfg, "runs/quickstart", overwrite=True)
print("greedy return per agent:", result.last_test["policy_return_mean/agent"])

# later: continue exactly where it stopped, for twice the steps
result = interplay.resume("runs/quickstart", [f"train.steps={2 * steps}"])
print("after resuming:", result.last_test["policy_return_mean/agent"])
