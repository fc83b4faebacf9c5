"""Value decomposition (VDN, QMIX) over sequences of joint rows, for recurrent Q-networks.

A sequence is one env copy's joint rows in one episode (:mod:`interplay.data.sequences`).
Each agent of a recurrent policy unrolls from the state stored with it in the sequence's first
row, its state held where it is absent; a feed-forward policy's agents are valued row by row.
The team's value and its target are those of :class:`~interplay.algos.qmix.VDN`, cell by cell,
with n-step targets folded along the sequence.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

import numpy as np
import torch
from torch import nn

from interplay.algos.mixing import AgentQNets
from interplay.algos.recurrent_q import after_each, n_step_targets, unroll
from interplay.data.replay import GroupRows, JointReplayBuffer
from interplay.data.sequences import Windows
from interplay.nets.inputs import obs_tensor
from interplay.nets.recurrent import RecurrentNet


class Team(Protocol):
    """The learner whose team is valued: its agents' networks, mixers and reward."""

    device: str
    settings: Any
    policies: dict[str, AgentQNets]
    env_state: Any
    mixer: nn.Module | None
    target_mixer: nn.Module | None

    def _mix(self, q: torch.Tensor, state: torch.Tensor, mixer: nn.Module | None,
             live: torch.Tensor) -> torch.Tensor: ...

    def _team_reward(self, buffer: JointReplayBuffer, pos: np.ndarray) -> np.ndarray: ...


class AgentValues(NamedTuple):
    """One policy's agents over ``[L, B, k]`` cells."""

    q: torch.Tensor  # the online values of the actions taken
    next_value: torch.Tensor  # the target values at the next observations (double Q)
    obs: torch.Tensor  # [L, B, k * d] float, for a mixer that reads the observations
    next_obs: torch.Tensor


def agent_values(team: Team, p: AgentQNets, r: GroupRows, valid: torch.Tensor) -> AgentValues:
    """Policy ``p``'s agents' values over the cells ``r`` (``[L, B, k, ...]``)."""
    dev, double = team.device, team.settings.double
    L, B, k = r.present.shape
    obs = obs_tensor(r.obs.reshape(L, B, k, -1), dev)
    nxt = obs_tensor(r.next_obs.reshape(L, B, k, -1), dev)
    if isinstance(p.online, RecurrentNet):
        assert r.hidden is not None
        live = (torch.as_tensor(r.present, device=dev) & valid.unsqueeze(2)).reshape(L, B * k)
        start = torch.as_tensor(r.hidden[0], device=dev).reshape(B * k, -1)
        flat, flat_next = obs.reshape(L, B * k, -1), nxt.reshape(L, B * k, -1)
        q_all, after = unroll(p.online, flat, start, live)
        with torch.no_grad():
            _, target_after = unroll(p.target, flat, start, live)
            target_all = after_each(p.target, flat_next, target_after)
            chooser = after_each(p.online, flat_next, after.detach()) if double else target_all
        q_all, target_all, chooser = (x.reshape(L, B, k, -1) for x in (q_all, target_all, chooser))
    else:
        q_all = p.online.over_agents(obs)
        with torch.no_grad():
            target_all = p.target.over_agents(nxt)
            chooser = p.online.over_agents(nxt) if double else target_all
    action = torch.as_tensor(r.action, device=dev).long().view(L, B, k, 1)
    with torch.no_grad():
        if r.next_mask is not None:
            chooser = chooser.masked_fill(~torch.as_tensor(r.next_mask, device=dev), -torch.inf)
        best = chooser.argmax(dim=3, keepdim=True)
        next_value = target_all.gather(3, best).squeeze(3)
    return AgentValues(q_all.gather(3, action).squeeze(3), next_value,
                       obs.reshape(L, B, -1).float(), nxt.reshape(L, B, -1).float())


def team_sequences(team: Team, buffer: JointReplayBuffer, w: Windows
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """The team's online value of each cell of windows ``w`` ``[L, B]``, and its n-step
    target."""
    s, dev = team.settings, team.device
    rows = buffer.gather(w.pos)
    valid = torch.as_tensor(w.valid, device=dev)
    L, B = w.pos.shape
    q_parts, next_parts, here, goes_on, obs, next_obs = [], [], [], [], [], []
    for pid, p in team.policies.items():
        r = rows[pid]
        v = agent_values(team, p, r, valid)
        q_parts.append(v.q)
        next_parts.append(v.next_value)
        here.append(torch.as_tensor(r.present, device=dev))
        # an agent whose episode was cut short is still valued at its last observation
        goes_on.append(torch.as_tensor(r.present & ~r.terminated, device=dev))
        obs.append(v.obs)
        next_obs.append(v.next_obs)
    here_all = torch.cat(here, dim=2).float()
    next_all = torch.cat(goes_on, dim=2).float()
    if team.env_state is None:
        state, next_state = torch.cat(obs, dim=2), torch.cat(next_obs, dim=2)
    else:
        state, next_state = (torch.as_tensor(buffer.state_rows(w.pos.ravel(), key), device=dev)
                             .reshape(L, B, -1) for key in ("state", "next_state"))
    n = here_all.shape[2]

    def mix(q: torch.Tensor, at: torch.Tensor, mixer: nn.Module | None,
            live: torch.Tensor) -> torch.Tensor:
        return team._mix(q.reshape(L * B, n), at.reshape(L * B, -1), mixer,
                         live.reshape(L * B, n)).reshape(L, B)

    q_tot = mix(torch.cat(q_parts, dim=2) * here_all, state, team.mixer, here_all)
    with torch.no_grad():
        next_tot = mix(torch.cat(next_parts, dim=2) * next_all, next_state, team.target_mixer,
                       next_all)
        value = (next_all.sum(dim=2) > 0).float() * next_tot  # some agent of the team goes on
        reward = torch.as_tensor(team._team_reward(buffer, w.pos.ravel()).reshape(L, B),
                                 dtype=torch.float32, device=dev)
        target = n_step_targets(reward, valid, value, s.gamma, s.n_step)
    return q_tot, target
