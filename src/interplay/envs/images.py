"""Image observations: which axis holds the channels, and the grayscale and resize steps that
run between env and policy, before frame stacking (what SuperSuit's ``color_reduction`` and
``resize`` wrappers do to envs such as pistonball)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from interplay.envs.leaves import Leaves, leaf_layout
from interplay.errors import ConfigError

LUMA = (0.299, 0.587, 0.114)
"""ITU-R BT.601 weights of R, G and B in luminance (what OpenCV and PIL use)."""


def is_image(space: spaces.Space) -> bool:
    """An observation kept as an image: a 3-D Box (HWC or CHW)."""
    return isinstance(space, spaces.Box) and len(space.shape) == 3


PICTURE_CHANNELS = (1, 3, 4)
"""Channel counts of pictures (gray, RGB, RGBA); any other count is more likely feature planes,
whose count may exceed the board's width (Overcooked's 25 planes on a 5x4 grid)."""


def image_layout(shape: tuple[int, ...], layout: str, where: str, dtype: Any = np.uint8,
                 needed: bool = True) -> str:
    """``hwc`` or ``chw`` for an image of ``shape``: as ``layout`` says, or for ``auto`` the
    smaller of the first and last axes holds the channels.

    ``needed`` False says nothing will read the frames as images (an MLP sees the same flat
    rows either way), so an ambiguous shape is not refused then. A guess that looks unlike
    a picture (a channel count other than 1, 3 or 4, or float planes) is warned about."""
    if layout != "auto":
        return layout
    if shape[0] == shape[-1]:
        if not needed:
            return "chw"
        raise ConfigError(f"{where}: the image observations of shape {shape} could keep their "
                          "channels first or last; set model.layout to hwc or chw")
    guess = "hwc" if shape[-1] < shape[0] else "chw"
    _warn_unlike_a_picture(shape, guess, np.dtype(dtype), where)
    return guess


def _warn_unlike_a_picture(shape: tuple[int, ...], guess: str, dtype: np.dtype,
                           where: str) -> None:
    c, h, w = frame_shape(shape, guess)
    if c in PICTURE_CHANNELS and dtype == np.uint8:
        return
    other = "chw" if guess == "hwc" else "hwc"
    oc, oh, ow = frame_shape(shape, other)
    what = f"{dtype} planes" if dtype != np.uint8 else "channels"
    warnings.warn(f"{where}.layout: the observations of shape {shape} ({dtype}) are taken as "
                  f"{guess}: {c} {what} of {h}x{w} (auto takes the smaller end axis for the "
                  f"channels); if they are {oc} planes of {oh}x{ow}, set {where}.layout: "
                  f"{other}, or set {where}.layout: {guess} to keep this reading",
                  UserWarning, stacklevel=3)


def frame_shape(shape: tuple[int, ...], layout: str) -> tuple[int, int, int]:
    """``(channels, height, width)`` of an image of ``shape``."""
    if layout == "hwc":
        return shape[2], shape[0], shape[1]
    return shape[0], shape[1], shape[2]


def in_layout(chw: tuple[int, int, int], layout: str) -> tuple[int, int, int]:
    c, h, w = chw
    return (h, w, c) if layout == "hwc" else (c, h, w)


class ImagePrep:
    """Grayscale, then resize, batches of flat image rows ``[..., dim]``; rows stay flat.

    Runs in torch on the CPU, once per step on every copy and agent of a policy: luminance is
    a weighted sum of the channels, and shrinking averages each output pixel's area of the
    input (``interpolate(mode="area")``; bilinear where an axis grows). Bytes come back as
    bytes, rounded.
    """

    def __init__(self, space: spaces.Box, layout: str, resize: list[int] | None,
                 grayscale: bool, where: str):
        self.layout = layout
        self.shape = tuple(space.shape)
        c, h, w = frame_shape(self.shape, layout)
        if grayscale and c != 3:
            raise ConfigError(f"{where}.grayscale: the observations of shape {self.shape} have "
                              f"{c} channels ({layout}); grayscale takes RGB (3 channels)")
        self.grayscale = grayscale
        self.size = (h, w) if resize is None else (int(resize[0]), int(resize[1]))
        self.resize = self.size != (h, w)
        self.mode = "area" if self.size[0] <= h and self.size[1] <= w else "bilinear"
        out_c = 1 if grayscale else c
        self.out_shape = in_layout((out_c, *self.size), layout)
        self.dtype = np.uint8 if space.dtype == np.uint8 else np.float32
        low = float(np.min(space.low)) if np.isfinite(space.low).all() else -np.inf
        high = float(np.max(space.high)) if np.isfinite(space.high).all() else np.inf
        self.space = spaces.Box(low, high, self.out_shape,
                                np.uint8 if self.dtype == np.uint8 else np.float32)
        self._luma = torch.tensor(LUMA)

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        lead = rows.shape[:-1]
        # torch wants memory it may write to: the env's read-only views are copied
        x = torch.from_numpy(np.require(rows, requirements=("C", "W"))).reshape(-1, *self.shape)
        x = x.float()
        if self.grayscale:
            # luminance summed over the channels where the env keeps them, one plane per frame:
            # permuting hwc frames first took about three times as long on pistonball's frames
            if self.layout == "hwc":
                x = (x @ self._luma).unsqueeze(1)
            else:
                x = (x * self._luma.reshape(1, 3, 1, 1)).sum(dim=1, keepdim=True)
        elif self.layout == "hwc":
            x = x.permute(0, 3, 1, 2)
        if self.resize:
            x = torch.nn.functional.interpolate(x, size=self.size, mode=self.mode)
        if self.dtype == np.uint8:
            x = x.round_().clamp_(0, 255).to(torch.uint8)
        if self.layout == "hwc":
            x = x.permute(0, 2, 3, 1)
        return x.contiguous().numpy().reshape(*lead, -1)

    def __repr__(self) -> str:
        return (f"ImagePrep({self.shape} -> {self.out_shape}, grayscale={self.grayscale})")


def image_prep(space: Any, model: Any, where: str) -> ImagePrep | None:
    """The preprocessing ``model`` (a :class:`~interplay.config.model.ModelSettings`) asks
    for on observations of ``space``; None when it asks for none."""
    if model is None or (model.resize is None and not model.grayscale):
        return None
    if not is_image(space):
        key = "resize" if model.resize is not None else "grayscale"
        raise ConfigError(f"{where}.{key}: the observations ({space}) are not images (a 3-D "
                          "Box, HWC or CHW); leave resize and grayscale unset for this policy")
    layout = image_layout(tuple(space.shape), model.layout, where, space.dtype)
    return ImagePrep(space, layout, model.resize, model.grayscale, where)


class LeafPrep:
    """:class:`ImagePrep`'s grayscale and resize on each image entry of rows kept entry by
    entry (:mod:`interplay.envs.leaves`); the other entries are copied as they are."""

    layout = None  # each entry keeps its own; the networks read them from ``space``

    def __init__(self, leaves: Leaves, model: Any, where: str):
        self.leaves = leaves
        self.preps: dict[str, ImagePrep] = {}
        out: dict[str, spaces.Space] = {}
        for leaf in leaves.leaves:
            out[leaf.key] = leaf.space
            if not leaf.image:
                continue
            space = leaf.space
            if len(leaf.shape) == 2:  # one channel: a CHW frame of one plane
                space = spaces.Box(space.low.reshape(1, *leaf.shape),
                                   space.high.reshape(1, *leaf.shape), dtype=space.dtype)
            own = model.encoders.get(leaf.key)
            layout = "chw" if len(leaf.shape) == 2 else image_layout(
                leaf.shape, (own and own.layout) or model.layout, where, space.dtype)
            prep = ImagePrep(space, layout, model.resize, model.grayscale,
                             f"{where} (entry {leaf.key!r})")
            self.preps[leaf.key] = prep
            out[leaf.key] = prep.space
        self.space: spaces.Dict | spaces.Tuple = (
            spaces.Tuple([out[k] for k in leaves.keys]) if isinstance(leaves.space, spaces.Tuple)
            else spaces.Dict(out))
        made = leaf_layout(self.space)
        assert made is not None  # image entries stay images
        self.out = made

    def __call__(self, rows: np.ndarray) -> np.ndarray:
        out = np.empty((*rows.shape[:-1], self.out.dim), self.out.dtype)
        for leaf in self.leaves.leaves:
            target = self.out.leaf(leaf.key)
            values = self.leaves.values(rows, leaf.key)
            if leaf.key in self.preps:
                values = self.preps[leaf.key](values)
            if self.out.bytes and target.dtype != np.uint8:
                values = np.ascontiguousarray(values, np.float32).view(np.uint8)
            out[..., target.start:target.end] = values
        return out

    def __repr__(self) -> str:
        return f"LeafPrep({self.preps})"


def leaf_prep(leaves: Leaves, model: Any, where: str) -> LeafPrep | None:
    """The grayscale and resize ``model`` asks for on the image entries of ``leaves``; None when
    it asks for neither."""
    if model is None or (model.resize is None and not model.grayscale):
        return None
    return LeafPrep(leaves, model, where)
