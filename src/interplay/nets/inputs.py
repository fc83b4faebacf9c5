"""What networks take: observations as float32 tensors, whatever dtype they are stored in."""

from __future__ import annotations

import numpy as np
import torch


def obs_tensor(x: np.ndarray, device: str | torch.device) -> torch.Tensor:
    """Observations (float32 rows, or uint8 frames kept as bytes) as a float32 tensor.

    The conversion happens once, here; storage keeps the observation's own dtype. Frames are
    moved as bytes and widened on the device. Read-only views are copied (torch wants memory
    it may write to); writable float32 arrays are not.
    """
    if x.dtype == np.uint8:
        return torch.from_numpy(np.require(x, requirements=("C", "W"))).to(device).float()
    return torch.from_numpy(np.require(x, np.float32, ("C", "W"))).to(device)
