"""The experiment: the training loop, building a run, checkpoints, evaluation."""

from interplay.experiment.loop import Experiment, Result, resume, train

__all__ = ["Experiment", "Result", "resume", "train"]
