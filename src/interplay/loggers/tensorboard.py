"""TensorBoard and Weights & Biases loggers for the rows that go to ``metrics.jsonl``."""

from __future__ import annotations

import numbers
from pathlib import Path
from typing import Any

from torch.utils.tensorboard import SummaryWriter


def scalars(row: dict[str, Any]) -> tuple[str, int, dict[str, float]]:
    """Split a report row into its phase, its env step and its numeric fields by name.

    Names are ``<phase>/<field>``; ``None``, booleans and text are left out.
    """
    try:
        phase, step = str(row["phase"]), int(row["env_steps"])
    except KeyError as err:
        raise ValueError(f"metrics row has no {err.args[0]!r}: {row!r}") from None
    values = {
        f"{phase}/{key}": float(value) for key, value in row.items()
        if key not in ("phase", "env_steps")
        and isinstance(value, numbers.Real) and not isinstance(value, bool)
    }
    return phase, step, values


class TensorBoardLogger:
    """Each numeric field of a row as a scalar ``<phase>/<field>`` at step ``env_steps``."""

    def __init__(self, log_dir: Path):
        self._writer = SummaryWriter(log_dir=str(log_dir))

    def write(self, row: dict[str, Any]) -> None:
        _, step, values = scalars(row)
        for tag, value in values.items():
            self._writer.add_scalar(tag, value, global_step=step)
        # Reports are rare next to env steps; flushing each keeps a crashed run's curves.
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


class WandbLogger:
    """The same rows sent to Weights & Biases, with ``env_steps`` as the x axis."""

    def __init__(self, run_dir: Path, project: str, config: dict[str, Any], mode: str = "offline"):
        try:
            import wandb
        except ImportError as err:
            raise ImportError(
                "W&B logging needs the wandb package: pip install 'interplay[wandb]'") from err
        self._run = wandb.init(project=project, config=config, dir=str(run_dir),
                               name=Path(run_dir).name, mode=mode)
        # Train and test rows share env steps, so W&B's own step counter cannot be the x axis.
        self._run.define_metric("env_steps")
        self._run.define_metric("*", step_metric="env_steps")

    def write(self, row: dict[str, Any]) -> None:
        _, step, values = scalars(row)
        self._run.log({"env_steps": step, **values})

    def close(self) -> None:
        self._run.finish()
