"""interplay: multi-agent reinforcement learning on PettingZoo envs."""

from interplay.algos import Algorithm, register
from interplay.config.algo import AlgoSettings
from interplay.config.loading import load as load_config
from interplay.config.schema import Config
from interplay.envs.registry import register_env
from interplay.errors import ConfigError
from interplay.experiment.evaluate import evaluate
from interplay.experiment.loop import Result, resume, train
from interplay.experiment.policies import load_policy
from interplay.population import league  # noqa: F401  (a league attaches itself to runs)
from interplay.run.callbacks import Callbacks
from interplay.run.episodes import Episode

__all__ = [
    "AlgoSettings", "Algorithm", "Callbacks", "Config", "ConfigError", "Episode", "Result",
    "evaluate", "load_config", "load_policy", "register", "register_env", "resume", "train",
]
__version__ = "0.1.0"
