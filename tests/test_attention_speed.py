"""An attention critic attends once per step, not once per agent row, and gives what attending
once per row gives.

Rows of one step share their joint part (MAPPO's rows of one table row, MADDPG's critic and
target rows): one pass, each row read at its own token. MADDPG's actor-loss rows, each with its
own agent's action swapped in: the last layer runs at the read token alone, the keys and
values projected once per step with one layer. Each is compared, values and gradients, with the
per-row pass (:meth:`AgentAttention.forward` on every row).
"""

from __future__ import annotations

import pytest
import torch

from interplay.config.critic_model import CriticModelSettings
from interplay.nets.attention import OwnTokenCritic, TokenLayout

GROUPS = ((2, 4, 3), (3, 5, 2))
"""Two groups: two agents seeing 4 numbers with actions of 3, three seeing 5 with actions of 2;
the rows are the second group's."""
OWN = 1
K, D, A = GROUPS[OWN]
LAYOUT = TokenLayout(GROUPS, lead=D + A + K, own_group=OWN, slot_at=D + A)


def critic(layers: int, seed: int = 0) -> OwnTokenCritic:
    torch.manual_seed(seed)
    model = CriticModelSettings(type="attention", embed=8, heads=2, layers=layers, hidden=[8])
    return OwnTokenCritic(LAYOUT, model, 2, 1.0)


def step_rows(b: int, own: torch.Tensor | None = None, live: list[int] | None = None,
              seed: int = 1) -> torch.Tensor:
    """``[b, K, width]`` as the centralised learners build them: row j holds agent j's
    observation, action (``own[:, j]`` when given, in its joint place too) and slot, then the
    step's joint observations, actions and live flags."""
    g = torch.Generator().manual_seed(seed)
    obs = [torch.randn(b, k, d, generator=g) for k, d, _ in GROUPS]
    act = [torch.randn(b, k, a, generator=g) for k, _, a in GROUPS]
    mine = act[OWN] if own is None else own
    joint_obs = torch.cat([o.reshape(b, -1) for o in obs], dim=1)[:, None].expand(b, K, -1)
    eye = torch.eye(K)[None, :, :, None]
    swapped = (eye * mine[:, None] + (1 - eye) * act[OWN][:, None]).reshape(b, K, -1)
    flags = torch.tensor(live or [1] * LAYOUT.tokens, dtype=torch.float32).expand(b, K, -1)
    return torch.cat([obs[OWN], mine, torch.eye(K).expand(b, K, K), joint_obs,
                      act[0].reshape(b, 1, -1).expand(b, K, -1), swapped, flags], dim=2)


def per_row(c: OwnTokenCritic, x: torch.Tensor) -> torch.Tensor:
    """The transformer over every row's tokens, read at the row's own token."""
    y = c.attention(x)  # [b, K, tokens, out]
    at = LAYOUT.offset(OWN) + torch.arange(K)
    return y[:, torch.arange(K), at]


def attended(c: OwnTokenCritic, *args: object, **kwargs: object) -> tuple[torch.Tensor, list[int]]:
    """``c``'s outputs, and the token sets each whole-transformer pass took."""
    sizes: list[int] = []
    hook = c.attention.attend.register_forward_hook(lambda _m, inp, _o: sizes.append(len(inp[0])))
    try:
        return c(*args, **kwargs), sizes
    finally:
        hook.remove()


def test_a_steps_rows_share_one_pass_and_give_each_agents_own_value():
    c, x = critic(2), step_rows(6)
    out, sizes = attended(c, x)
    assert sizes == [6]
    assert torch.allclose(out, per_row(c, x), atol=1e-6)


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("live", [None, [1, 0, 1, 0, 1], [0, 0, 0, 0, 0]])
def test_rows_with_their_own_action_swapped_in_match_a_pass_per_row(layers, live):
    c = critic(layers)
    own = torch.randn(5, K, A, generator=torch.Generator().manual_seed(3), requires_grad=True)
    x = step_rows(5, own, live)
    (fast, sizes), slow = attended(c, x), per_row(c, x)
    assert sizes == []  # the layers run at the own tokens, not the whole transformer per row
    assert torch.allclose(fast, slow, atol=1e-5)
    g_fast, = torch.autograd.grad(fast.square().sum(), own, retain_graph=True)
    g_slow, = torch.autograd.grad(slow.square().sum(), own)
    assert torch.allclose(g_fast, g_slow, atol=1e-5)


def test_rows_that_differ_otherwise_are_each_attended_on_their_own():
    c = critic(1)
    x = step_rows(4, torch.randn(4, K, A))
    x[:, 1, LAYOUT.lead] += 1.0  # row 1 sees another first observation
    out, sizes = attended(c, x)
    assert sizes == [4 * K]
    assert torch.allclose(out, per_row(c, x), atol=1e-6)


def test_flat_rows_sharing_a_table_row_attend_once_each_table_row():
    c = critic(2)
    x = step_rows(4).reshape(4 * K, -1)
    order = torch.randperm(4 * K, generator=torch.Generator().manual_seed(2))
    x, share = x[order], (torch.arange(4 * K) // K)[order]
    slot = (torch.arange(4 * K) % K)[order]
    out, sizes = attended(c, x, slot, share=share)
    assert sizes == [4]
    assert torch.allclose(out, c(x, slot), atol=1e-6)


def test_each_action_of_a_discrete_agent_swapped_in_along_leading_axes():
    c = critic(1)
    each = torch.eye(A)
    x = torch.stack([step_rows(3, each[a].expand(3, K, A)) for a in range(A)], dim=1)
    out, sizes = attended(c, x)  # [b, actions, K, out]
    assert sizes == []
    slow = torch.stack([per_row(c, x[:, a]) for a in range(A)], dim=1)
    assert torch.allclose(out, slow, atol=1e-5)
