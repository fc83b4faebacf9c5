"""interplay: multi-agent reinforcement learning on PettingZoo envs."""

from interplay.callbacks import Callbacks
from interplay.config import Config, ConfigError
from interplay.config import load as load_config
from interplay.envs.registry import register_env
from interplay.episodes import Episode
from interplay.experiment import Result, resume, train

__all__ = [
    "Callbacks", "Config", "ConfigError", "Episode", "Result", "load_config", "register_env",
    "resume", "train",
]
__version__ = "0.1.0"
