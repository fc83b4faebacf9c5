"""One protocol over PettingZoo's two APIs: who acts now, what they see, what everyone got.

An adapter drives one env copy. Each ``reset``/``step`` returns a :class:`CopyStep` that says
which agents must act next (with their observations), the reward every agent received from
the step just taken, and which agents finished in it (with their last observation and
whether they were terminated or truncated). AEC dead steps are taken inside the adapter.
The episode ends when no agent is left, or is cut at ``max_steps`` moves as truncation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gymnasium import spaces
from pettingzoo import AECEnv
from pettingzoo.utils.wrappers import BaseWrapper

from interplay.errors import UserError


class EnvContractError(UserError, RuntimeError):
    """The env broke the PettingZoo contract in a way interplay cannot paper over."""


@dataclass(slots=True)
class CopyStep:
    obs: dict[str, Any]  # agents that act next -> the env's own observation
    infos: dict[str, dict]  # agents that act next -> their info dict (others may be in it)
    rewards: dict[str, Any] = field(default_factory=dict)  # agent -> a number
    # agent -> its last observation, or None when the env gave none with the step that ended
    # it (then the observation it last acted on stands)
    terminated: dict[str, Any] = field(default_factory=dict)
    truncated: dict[str, Any] = field(default_factory=dict)
    final_infos: dict[str, dict] = field(default_factory=dict)  # ended agent -> its last info
    over: bool = False
    # ``tuple(obs)``, where the adapter has it: the same object from step to step while the
    # same agents act in the same order (the buffers then know the order at a glance).
    movers: tuple[str, ...] | None = None
    # ``tuple(rewards)`` where that is who acted in the step, in the order they were handed
    # over (the ``movers`` object of the step before)
    reward_order: tuple[str, ...] | None = None


def is_aec(env: Any) -> bool:
    return isinstance(env, AECEnv) or (hasattr(env, "last") and hasattr(env, "agent_iter"))


def adapt(env: Any, max_steps: int | None) -> AECAdapter | ParallelAdapter:
    return AECAdapter(env, max_steps) if is_aec(env) else ParallelAdapter(env, max_steps)


class _Adapter:
    def __init__(self, env: Any, max_steps: int | None):
        self.env = env
        self.max_steps = max_steps
        self.t = 0
        agents = getattr(env, "possible_agents", None)
        if not agents:
            raise EnvContractError(
                f"{type(env).__name__} has no possible_agents; PettingZoo envs must list "
                "every agent that can ever appear in possible_agents"
            )
        self.possible_agents: list[str] = list(agents)
        self._known = frozenset(self.possible_agents)

    def observation_space(self, agent: str) -> spaces.Space:
        return self.env.observation_space(agent)

    def action_space(self, agent: str) -> spaces.Space:
        return self.env.action_space(agent)

    def state(self) -> Any:
        return self.env.state()

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        self.env.close()

    def restored(self) -> None:
        """Rebuild what is derived from the env and this adapter after a snapshot was put back:
        an env that keeps state outside Python objects (a game engine's) rebuilds it in its
        own ``restored()`` from the data the snapshot put back."""
        rebuild = getattr(self.env, "restored", None)
        if callable(rebuild):
            rebuild()

    def _unknown(self, agents: Any) -> None:
        if self._known.issuperset(agents):
            return
        strangers = [a for a in agents if a not in self._known]
        if strangers:
            raise EnvContractError(
                f"agent(s) {strangers} appeared but are not in possible_agents "
                f"{self.possible_agents}; list every agent in possible_agents"
            )


class ParallelAdapter(_Adapter):
    """Every live agent acts at every step.

    When the env's observation dict holds exactly the live agents, it is handed on as it is
    (not copied); so is its info dict, always (it is read by agent).
    """

    turn_based = False

    def restored(self) -> None:
        super().restored()
        self._set_live(self._live)

    def _set_live(self, live: list[str]) -> None:
        """The agents that act next, as a list, as a tuple and as the keys the env's dicts are
        checked by."""
        self._live = live
        self._live_order = tuple(live)
        self._live_keys = frozenset(live)

    def reset(self, seed: int | None) -> CopyStep:
        obs, infos = self.env.reset(seed=seed)
        self.t = 0
        live = list(self.env.agents)
        self._unknown(live)
        missing = [a for a in live if a not in obs]
        if missing:
            raise EnvContractError(f"reset() returned no observation for live agent(s) {missing}")
        self._set_live(live)
        if list(obs) == live:  # the live agents, in their order: handed on as they are
            return CopyStep(obs, infos, movers=self._live_order)
        return CopyStep({a: obs[a] for a in live}, infos)

    def step(self, actions: dict[str, Any]) -> CopyStep:
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        self.t += 1
        agents, live = self.env.agents, self._live
        if (agents == live and live and list(rewards) == live and list(obs) == live
                and not (any(terms.values()) or any(truncs.values()))
                and (self.max_steps is None or self.t < self.max_steps)):
            # Most steps: the same agents go on, none finished, every dict in their order
            return CopyStep(obs, infos, rewards, movers=self._live_order,
                            reward_order=self._live_order)
        out = CopyStep({}, {}, rewards)
        if agents == live:  # the same agents go on, all known
            # Rewards in the movers' order are all known; any other order is looked at.
            if list(rewards) == self._live:
                out.reward_order = self._live_order
            elif not self._known.issuperset(rewards):
                self._unknown(list(rewards))
            if not (any(terms.values()) or any(truncs.values())):
                return self._next(out, obs, infos)
        live = list(agents)
        if not (self._known.issuperset(live) and self._known.issuperset(rewards)):
            self._unknown(list(dict.fromkeys([*live, *rewards])))
        self._ended(out, obs, terms, truncs, infos, set(live))
        self._set_live([a for a in live if not (a in out.terminated or a in out.truncated
                                                or terms.get(a) or truncs.get(a))])
        return self._next(out, obs, infos)

    def _next(self, out: CopyStep, obs: dict, infos: dict) -> CopyStep:
        """Fill in ``out`` for the live agents, who act next (unless the episode is over)."""
        live = self._live
        if list(obs) == live:  # the live agents, in their order
            out.movers = self._live_order
        elif obs.keys() != self._live_keys:  # the env's dict may hold more agents, or miss one
            try:
                obs = {a: obs[a] for a in live}
            except KeyError as err:
                raise EnvContractError(
                    f"step {self.t}: agent {err.args[0]!r} is live but step() returned no "
                    "observation for it") from None
        if not live:
            out.over = True
        elif self.max_steps is not None and self.t >= self.max_steps:
            out.truncated.update(obs)
            out.final_infos.update((a, infos.get(a, {})) for a in live)
            out.over = True
            self._set_live([])
        else:
            out.obs = obs
            out.infos = infos  # looked up by agent: agents that do not act may be in it
        return out

    def _ended(self, out: CopyStep, obs: dict, terms: dict, truncs: dict, infos: dict,
               live: set) -> None:
        """Book the agents that finished in this step, with their last observation and info."""
        for a in self._live:
            if terms.get(a, False) or truncs.get(a, False) or a not in live:
                last = obs.get(a)
                out.final_infos[a] = infos.get(a, {})
                # An agent that vanishes without a flag has ended: nothing more comes to it.
                if truncs.get(a, False) and not terms.get(a, False):
                    out.truncated[a] = last
                else:
                    out.terminated[a] = last


class AECAdapter(_Adapter):
    """One agent moves per step; finished agents get their dead step here, not from a policy.

    The env's agents, turn, rewards, flags and infos are read from :func:`fields_holder`;
    ``step``, ``observe`` and ``reset`` go through the env as given, wrappers and all.
    """

    turn_based = True  # one mover per step

    def reset(self, seed: int | None) -> CopyStep:
        self.env.reset(seed=seed)
        self._fields = fields_holder(self.env)
        self.t = 0
        self._done: set[str] = set()
        out = CopyStep(obs={}, infos={})
        self._settle(out)
        return out

    def restored(self) -> None:
        super().restored()
        self._fields = fields_holder(self.env)

    def observe(self, agent: str) -> Any:
        """``agent``'s observation of the env as it is now."""
        return self.env.observe(agent)

    def step(self, actions: dict[str, Any]) -> CopyStep:
        agent = self._fields.agent_selection
        if agent not in actions:
            raise EnvContractError(f"step {self.t}: it is {agent!r}'s turn but no action was given")
        self.env.step(actions[agent])
        self.t += 1
        out = CopyStep(obs={}, infos={})
        self._book_rewards(out)
        self._settle(out)
        if not out.over and self.max_steps is not None and self.t >= self.max_steps:
            for a in self._fields.agents:
                if a not in self._done:
                    out.truncated[a] = self.env.observe(a)
                    out.final_infos[a] = self._fields.infos.get(a, {})
            out.obs, out.infos, out.over = {}, {}, True
        return out

    def _book_rewards(self, out: CopyStep) -> None:
        rewards = out.rewards
        for a, r in self._fields.rewards.items():
            rewards[a] = rewards.get(a, 0.0) + float(r)

    def _settle(self, out: CopyStep) -> None:
        """Record newly finished agents, take their dead steps, and find who moves next."""
        env, fields, done = self.env, self._fields, self._done
        while True:
            agents = fields.agents
            self._unknown(agents)
            terms, truncs = fields.terminations, fields.truncations
            for a in agents:
                if a in done:
                    continue
                term, trunc = terms.get(a, False), truncs.get(a, False)
                if term or trunc:
                    done.add(a)
                    (out.terminated if term else out.truncated)[a] = env.observe(a)
                    out.final_infos[a] = fields.infos.get(a, {})
            if not agents:
                out.over = True
                return
            selected = fields.agent_selection
            if terms.get(selected, False) or truncs.get(selected, False):
                env.step(None)
                self._book_rewards(out)
                continue
            out.obs = {selected: env.observe(selected)}
            out.infos = {selected: fields.infos.get(selected, {})}
            return


def fields_holder(env: Any) -> Any:
    """The object in ``env``'s wrapper chain that an AEC env's agents, turn, rewards, flags and
    infos are read from.

    PettingZoo's own wrappers only hand these reads down to the env they wrap (at about 1.6 us
    each, several times per move), so they are skipped; the first env or wrapper of any other
    kind, which may keep such fields itself, is the one read.
    """
    obj = env
    while isinstance(obj, BaseWrapper) and type(obj).__module__.startswith(_PZ_WRAPPERS):
        obj = obj.env
    return obj


_PZ_WRAPPERS = "pettingzoo.utils.wrappers."
