"""Batched particle physics of the MPE worlds: E copies of n discs stepped as arrays.

The constants and the update rule are those of mpe2's ``World``: an agent's move action is
turned into a force (sensitivity 5), soft contact forces push colliding discs apart, and the
state is integrated with ``dt = 0.1`` and damping 0.25, position first (with the old
velocity), then velocity.

Arrays are float64 and keep the copies on the *last* axis (positions are ``[n, 2, E]``), so
that every NumPy loop runs over thousands of copies rather than over two coordinates.
Work arrays are allocated once and reused.
"""

from __future__ import annotations

import numpy as np

DIM_P = 2
DT = 0.1
DAMPING = 0.25
CONTACT_FORCE = 1e2
CONTACT_MARGIN = 1e-3
SENSITIVITY = 5.0  # action -> force scale when an agent's ``accel`` is unset
MOVE_ACTIONS = 5  # no-op, -x, +x, -y, +y

# Force of each discrete move action [no_action, move_left, move_right, move_down, move_up].
_MOVE_X = np.array([0.0, -1.0, 1.0, 0.0, 0.0]) * SENSITIVITY
_MOVE_Y = np.array([0.0, 0.0, 0.0, -1.0, 1.0]) * SENSITIVITY


def discrete_move_force(actions: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Forces ``out[n, 2, E]`` of checked integer move actions ``actions[n, E]`` in [0, 5)."""
    np.take(_MOVE_X, actions, out=out[:, 0], mode="clip")
    np.take(_MOVE_Y, actions, out=out[:, 1], mode="clip")
    return out


def continuous_move_force(actions: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Forces ``out[n, 2, E]`` of Box move actions ``actions[n, E, 5]`` (entry 0 is unused).

    The differences are taken in the actions' own precision (float32), as mpe2 does, and
    scaled in float64.
    """
    out[:, 0] = actions[:, :, 2] - actions[:, :, 1]
    out[:, 1] = actions[:, :, 4] - actions[:, :, 3]
    out *= SENSITIVITY
    return out


def lengths(delta: np.ndarray, out: np.ndarray, tmp: np.ndarray) -> np.ndarray:
    """Euclidean lengths ``out[...]`` of vectors ``delta[..., 2, E]``, as mpe2 computes them."""
    np.square(delta[..., 0, :], out=out)
    np.square(delta[..., 1, :], out=tmp)
    out += tmp
    return np.sqrt(out, out=out)


# exp() below this underflows towards subnormals, which NumPy computes on a slow path; the
# floor changes log(1 + exp(x)) by less than 1e-304.
_EXP_FLOOR = -700.0


def softplus(x: np.ndarray, out: np.ndarray, tmp: np.ndarray) -> np.ndarray:
    """``log(1 + exp(x))`` (``np.logaddexp(0, x)``) written as ``max(x, 0) + log1p(exp(-|x|))``.

    The same value (to within 1e-304), but the vectorized ``exp``/``log1p`` run many times
    faster than ``logaddexp``.
    """
    np.abs(x, out=tmp)
    np.negative(tmp, out=tmp)
    np.maximum(tmp, _EXP_FLOOR, out=tmp)
    np.exp(tmp, out=tmp)
    np.log1p(tmp, out=tmp)
    np.maximum(x, 0.0, out=out)
    out += tmp
    return out


class Contacts:
    """Soft contact forces between every pair of ``n`` colliding, movable discs.

    For a pair at distance ``d`` whose radii sum to ``d_min``, the force on the first disc is
    ``contact_force * delta / d * k * log(1 + exp((d_min - d) / k))`` (``delta`` points from
    the second to the first, ``k`` is the contact margin) and the second gets its opposite.
    """

    def __init__(self, sizes: np.ndarray, num_envs: int):
        n = len(sizes)
        first, second = np.triu_indices(n, k=1)
        P, E = len(first), num_envs
        self.first, self.second = first, second
        self.dist_min = (sizes[first] + sizes[second])[:, None]  # [P, 1]
        # incidence[i, p] = +1 if disc i is pair p's first, -1 if its second.
        self.incidence = np.zeros((n, P))
        self.incidence[first, np.arange(P)] = 1.0
        self.incidence[second, np.arange(P)] = -1.0
        self._delta = np.empty((P, DIM_P, E))
        self._other = np.empty((P, DIM_P, E))
        self._dist = np.empty((P, E))
        self._x = np.empty((P, E))
        self._tmp = np.empty((P, E))
        self._sum = np.empty((n, DIM_P * E))

    def add_forces(self, pos: np.ndarray, force: np.ndarray) -> None:
        """Add the contact forces at positions ``pos[n, 2, E]`` into ``force[n, 2, E]``."""
        P = len(self.first)
        if P == 0:
            return
        delta, dist, x, tmp = self._delta, self._dist, self._x, self._tmp
        np.take(pos, self.first, axis=0, out=delta)
        np.take(pos, self.second, axis=0, out=self._other)
        delta -= self._other
        lengths(delta, dist, tmp)
        np.subtract(self.dist_min, dist, out=x)
        x /= CONTACT_MARGIN
        penetration = softplus(x, x, tmp)
        penetration *= CONTACT_MARGIN * CONTACT_FORCE
        penetration /= dist
        delta *= penetration[:, None]
        np.matmul(self.incidence, delta.reshape(P, -1), out=self._sum)
        force += self._sum.reshape(force.shape)


class Particles:
    """Positions and velocities ``[n, 2, E]`` of ``n`` movable discs in ``num_envs`` copies."""

    def __init__(self, num_envs: int, sizes: list[float], collide: bool, mass: float = 1.0):
        n = len(sizes)
        self.num_envs, self.n = num_envs, n
        self.sizes = np.asarray(sizes, float)
        self.mass = float(mass)
        self.pos = np.zeros((n, DIM_P, num_envs))
        self.vel = np.zeros((n, DIM_P, num_envs))
        self.contacts = Contacts(self.sizes, num_envs) if collide and n > 1 else None
        self._scratch = np.empty((n, DIM_P, num_envs))

    def step(self, force: np.ndarray) -> None:
        """One world step of every copy under the action forces ``force[n, 2, E]``.

        ``force`` is used as scratch: contact forces are added into it.
        """
        if self.contacts is not None:
            self.contacts.add_forces(self.pos, force)
        if self.mass != 1.0:
            force /= self.mass
        force *= DT
        np.multiply(self.vel, DT, out=self._scratch)
        self.pos += self._scratch
        self.vel *= 1.0 - DAMPING
        self.vel += force

    def reset_rows(self, rows: np.ndarray | slice, rng: np.random.Generator) -> None:
        """Place the discs of copies ``rows`` uniformly in [-1, 1]^2, at rest."""
        self.pos[:, :, rows] = uniform_positions(rng, self.num_envs, rows, self.n)
        self.vel[:, :, rows] = 0.0


def row_count(num_envs: int, rows: np.ndarray | slice) -> int:
    return len(range(num_envs)[rows]) if isinstance(rows, slice) else len(rows)


def uniform_positions(rng: np.random.Generator, num_envs: int, rows: np.ndarray | slice,
                      n: int) -> np.ndarray:
    """``n`` positions drawn uniformly in [-1, 1]^2 for each copy in ``rows``, as ``[n, 2, k]``.

    They are drawn copy by copy, body by body, x before y: the order of mpe2's draws.
    """
    count = row_count(num_envs, rows)
    return rng.uniform(-1.0, 1.0, (count, n, DIM_P)).transpose(1, 2, 0)
