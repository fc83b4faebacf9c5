"""Env runners on Ray, offered to the training loop as one runner.

Each :class:`EnvRunner` is a Ray actor holding its own env copies and copies of the policies'
actors, built from the config by the same builders as a local run. :class:`RayRunners` is
what the loop steps instead of a local :class:`~interplay.run.runner.Runner`: ``step()``
hands out, one step at a time, the transitions of every runner's copies (runner by runner,
each runner's copies renumbered after the ones before), and counts steps, agent steps and
finished episodes into the same report window. Behind it, each runner steps a block of steps
per remote call:

* on-policy learners (those whose :meth:`~interplay.Algorithm.steps_to_update` says when
  they next learn) get blocks that end exactly where they learn, and every runner acts with
  the weights of the last update: one runner is the local run, step for step;
* others get blocks of ``backend.steps_per_call`` steps, the next block already under way
  while the learner learns from this one; the updates the acting weights lag behind are
  reported as ``policy_lag``.

No block passes a checkpoint or the end of training, so checkpoints hold the runners' state
at the step the loop is at. The learner's state goes to the runners through Ray's object
store once per update, as CPU tensors whatever the learner's device. A runner whose actor
dies (its process, or its whole node) is started again on a node with room
(``runner_restarts``, ``ray/runners_lost``): its in-flight block and its episodes under way are
dropped (``ray/episodes_dropped``), as with an env copy that raised. Past
``backend.max_restarts`` the run stops with :class:`RunnerFailedError`, and what is saved
then holds no episodes under way (a resume starts fresh ones).

Each row also says where the learner's time went since the row before: waiting for the
runners' steps (``ray/sample_wait_s`` per update, ``ray/sample_share`` of the wall time) and
learning (``ray/learn_s`` per update).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from interplay.backends.ray.acting import cpu_weights, generators, set_states, states
from interplay.backends.ray.cluster import WorkLostError, brief, in_group, pack_group, scheduling
from interplay.backends.ray.riders import Passenger, Rider
from interplay.config.schema import BackendConfig
from interplay.envs.snapshot import capture, restore
from interplay.run.episodes import Episode, Window
from interplay.run.runner import Runner
from interplay.run.transitions import Transitions, concat
from interplay.seeding import runner_seed

RUNNER_READY_S = 300.0
"""Seconds runners may take to be placed and built before the run stops."""


# What train rows add with Ray env runners, for the glossary (docs/metrics.md).
RUNNER_DOCS = {
    "runner_restarts": "`backend.name: ray`: env runner actors that died and were replaced "
                       "since the run began",
    "policy_lag": "`backend.name: ray`: the most learner updates the runners' acting weights "
                  "lagged behind since the previous row (0 for on-policy learners)",
    "ray/runners_lost": "`backend.name: ray`: env runners lost since the run began (their "
                        "process or their node died); each lost one is started again while "
                        "`backend.max_restarts` allows",
    "ray/episodes_dropped": "`backend.name: ray`: episodes under way on lost env runners, "
                            "dropped since the run began (never counted as finished)",
    "ray/sample_wait_s": "`backend.name: ray`: seconds the learner waited for the runners' "
                         "steps, per update, since the previous row (its idle time: near 0 "
                         "when the runners keep up; all of it in a row without updates)",
    "ray/learn_s": "`backend.name: ray`: seconds the learner spent learning, per update, since "
                   "the previous row",
    "ray/sample_share": "`backend.name: ray`: the share of the wall time since the previous "
                        "row that the learner spent waiting for the runners (near 1: more "
                        "runners would help; near 0: the learner is the bottleneck)",
}


class RunnerFailedError(WorkLostError):
    """Env runners died more often than ``backend.max_restarts`` allows."""


@dataclass
class RunnerParts:
    """What a runner actor steps and acts with (built by ``interplay.experiment.parts.build_runner``)."""

    runner: Runner
    algo: Any
    actors: dict[str, Any]


@dataclass
class Step:
    """One step of the copies: transitions per policy, counts, and the episodes it ended."""

    out: dict[str, Transitions]
    env_steps: int
    agent_steps: int
    episodes: list[Episode] = field(default_factory=list)
    # What the riders said after it: (the first copy's index, one entry per rider) per runner.
    said: list[tuple[int, list[Any]]] = field(default_factory=list)


class _RecordingWindow(Window):
    """The runner's report window, keeping each finished episode for the learner's window."""

    def __init__(self, owner: dict[str, str]):
        super().__init__(owner)
        self.ended: list[Episode] = []

    def add(self, ep: Episode) -> None:
        self.ended.append(Episode(id=ep.id, env_index=ep.env_index, length=ep.length,
                                  returns=dict(ep.returns), custom=list(ep.custom)))


class EnvRunner:
    """One env runner, inside a Ray actor: ``build(index, restarts)`` makes its parts."""

    def __init__(self, build: Callable[[int, int], RunnerParts], index: int, restarts: int):
        parts = build(index, restarts)
        self.runner, self.algo, self.actors = parts.runner, parts.algo, parts.actors
        self.window = self.runner.window = _RecordingWindow(self.runner.window.owner)
        self.gens = generators(self.algo, self.actors)
        self.own_rngs = index > 0  # the first runner draws on from the learner's generators
        # Installed after the generators are listed: the learner lists the same ones.
        self.riders = [c for c in self.runner.callbacks.callbacks if isinstance(c, Rider)]
        for rider in self.riders:
            rider.install(parts, index, restarts)

    def pid(self) -> int:
        return os.getpid()

    def where(self) -> tuple[int, str, str]:
        """(process id, node id, node address) of this runner."""
        from interplay.backends.ray.cluster import node_address

        return (os.getpid(), *node_address())

    def reset(self, seed: int, steps: int) -> None:
        self.runner.reset(seed)
        self.runner.steps = steps  # the step numbers go on from the other runners'
        self.window.ended = []

    def run(self, n: int, explore: bool, weights: Any,
            orders: list[Any] | None = None) -> dict[str, Any]:
        """Step ``n`` times (after taking in ``weights``, when given, and the riders'
        ``orders``)."""
        if weights is not None:
            self._learn(weights)
        for rider, order in zip(self.riders, orders or [], strict=False):
            rider.begin(order)
        before = states(self.gens)
        runner, steps = self.runner, []
        for _ in range(n):
            env_steps, agent_steps = runner.env_steps, runner.agent_steps
            out = runner.step(explore)
            for pid, batch in out.items():
                self.algo.collect(pid, batch)
            said = [(0, [r.after_step() for r in self.riders])] if self.riders else []
            steps.append(Step(out, runner.env_steps - env_steps,
                              runner.agent_steps - agent_steps, self.window.ended, said))
            self.window.ended = []
        after = states(self.gens)
        return {"steps": steps, "stats": dict(runner.env.stats()),
                "rngs": {i: s for i, (b, s) in enumerate(zip(before, after, strict=True)) if b != s}}

    def _learn(self, weights: tuple[dict[str, Any], dict[str, Any]]) -> None:
        algo_state, actor_states = weights
        kept = states(self.gens) if self.own_rngs else None
        self.algo.load_state_dict(algo_state)
        for pid, state in actor_states.items():
            self.actors[pid].load_state_dict(state)
        if kept is not None:
            set_states(self.gens, dict(enumerate(kept)))
        self.own_rngs = True  # from now on its generators go on where they are

    def env_state(self) -> Any:
        env = self.runner.env
        if not env.snapshot_supported:
            return None
        env.current_step()  # writes any observations its last step left unwritten
        return capture(env)

    def state(self) -> dict[str, Any]:
        return {"state": self.runner.state_dict(), "env": self.env_state(),
                "rngs": states(self.gens)}

    def restore_env(self, snapshot: Any) -> None:
        env = self.runner.env
        restore(env, snapshot)
        env.restored()

    def load(self, state: dict[str, Any], rngs: list[dict[str, Any]] | None,
             episodes: bool = True) -> None:
        self.runner.load_state_dict(state, episodes=episodes)
        if rngs is not None:
            set_states(self.gens, dict(enumerate(rngs)))
            self.own_rngs = True

    def close(self) -> None:
        self.runner.env.close()


def window_state(w: Window) -> dict[str, Any]:
    """A report window as :meth:`Runner.state_dict` saves one."""
    return {"totals": w.totals, "lengths": w.lengths, "by_agent": dict(w.by_agent),
            "by_policy": dict(w.by_policy),
            "custom": {k: [r, v] for k, (r, v) in w.custom.items()}}


def load_window(w: Window, saved: dict[str, Any]) -> None:
    w.reset()
    w.totals, w.lengths = list(saved["totals"]), list(saved["lengths"])
    w.by_agent.update({k: list(v) for k, v in saved["by_agent"].items()})
    w.by_policy.update({k: list(v) for k, v in saved["by_policy"].items()})
    w.custom = {k: (r, list(v)) for k, (r, v) in saved["custom"].items()}


class RayRunners:
    """The loop's runner when ``backend.name`` is ``ray``: see the module's doc.

    ``env`` is the learner's view of the env (its agents and spaces; a probe, built with one
    copy); ``learner`` is (algorithm, actors) as the loop keeps them; ``steps_to_update``
    says how many steps the learner may take before it learns (None: it does not say);
    ``marks`` gives the env-step counts no block may pass (a checkpoint, the end).
    """

    def __init__(self, cfg: BackendConfig, build: Callable[[int, int], RunnerParts], env: Any,
                 per_runner: int, seed: int, learner: tuple[Any, dict[str, Any]],
                 collecting: bool, steps_to_update: Callable[[], int | None],
                 marks: Callable[[], list[int]], owner: dict[str, str],
                 passengers: list[Passenger] | None = None):
        from interplay.backends.ray.cluster import connect, reserve_learner

        self.cfg = cfg
        self.build = build
        self.per_runner = per_runner
        self.num_envs = per_runner * cfg.num_env_runners
        self.layout = [per_runner] * cfg.num_env_runners
        self.seed = seed
        self.algo, self.actors = learner
        self.gens = generators(self.algo, self.actors)
        self.collecting = collecting
        self.steps_to_update = steps_to_update
        self.marks = marks
        self.passengers = list(passengers or [])
        self._told: set[int] = set()  # runners told since they were built or reset
        # The env as the loop knows it: agents, spaces, whether turn-based.
        self.agents = env.agents
        self.turn_based = env.turn_based
        self.snapshot_supported = env.snapshot_supported
        self.window = Window(owner)
        self.env_steps = self.agent_steps = self.episodes = self.steps = 0
        self.restarts = 0
        self.lost = self.dropped = 0  # runners lost, and the episodes under way on them
        self.broken: str | None = None  # why the runners cannot go on, once they cannot
        self.updates = 0  # updates the learner made (told by the loop)
        # Where the learner's time goes, since the last row: waiting for steps, learning.
        self._wait_s = self._learn_s = 0.0
        self._row = (time.perf_counter(), 0)  # (time, updates) at the last row
        self._sent = -1  # the update count of the weights the runners hold; -1: none yet
        self._lag = 0  # the largest policy lag since the last report
        self._queue: deque[tuple[Step, int]] = deque()  # (merged step, weights' update count)
        self._inflight: list[Any] | None = None  # refs of the block under way, if any
        self._inflight_version = 0
        self._dead_stats: dict[str, float] = {}
        self._stats: list[dict[str, float]] = [{} for _ in self.layout]
        self._started = connect(cfg, at_least=cfg.cpus_per_runner * cfg.num_env_runners,
                                runners=cfg.num_env_runners)
        import ray

        self._ray = ray
        self._actor_cls = ray.remote(num_cpus=cfg.cpus_per_runner, num_gpus=0,
                                     max_restarts=0)(EnvRunner)
        self.handles: list[Any] = []
        self.where: list[tuple[int, str, str]] = [(0, "", "")] * cfg.num_env_runners
        self._learner_slot: Any = None
        self._group: Any = None  # the runners' placement group, for ``pack``
        try:
            self._learner_slot = reserve_learner(cfg)
            self._group = self._place(cfg.num_env_runners)
            self.handles = [self._new(r, 0) for r in range(cfg.num_env_runners)]
            self._wait_ready(self.handles)
        except BaseException:
            self.close()
            raise

    # -- runners --------------------------------------------------------------------------
    def _place(self, runners: int) -> Any:
        """The placement group ``backend.placement`` asks for (None: none)."""
        try:
            return pack_group(self.cfg, runners, RUNNER_READY_S)
        except TimeoutError:
            raise self._not_placed(runners) from None

    def _new(self, index: int, restarts: int) -> Any:
        where = scheduling(self.cfg) if self._group is None else in_group(self._group, index)
        return self._actor_cls.options(name=None, **where).remote(self.build, index, restarts)

    def _wait_ready(self, handles: list[Any]) -> None:
        ray = self._ray
        refs = [h.where.remote() for h in handles]
        ready, pending = ray.wait(refs, num_returns=len(refs), timeout=RUNNER_READY_S)
        if pending:
            raise self._not_placed(len(pending))
        for ref in ready:
            self.where[self.handles.index(handles[refs.index(ref)])] = self._get(ref, None)

    def _not_placed(self, runners: int) -> RunnerFailedError:
        need = self.cfg.cpus_per_runner * runners
        return RunnerFailedError(
            f"backend: {runners} env runner(s) were not placed within {RUNNER_READY_S:.0f} s; "
            f"each asks for backend.cpus_per_runner={self.cfg.cpus_per_runner} CPUs ({need} in "
            f"all) and the Ray cluster has {self._ray.cluster_resources().get('CPU', 0)} CPUs")

    def pids(self) -> list[int]:
        """The runner actors' process ids."""
        return self._ray.get([h.pid.remote() for h in self.handles])

    def nodes(self) -> list[str]:
        """The id of the Ray node each runner is on."""
        return [node for _, node, _ in self.where]

    def _runner_seed(self, index: int, restarts: int = 0, base: int | None = None) -> int:
        """The seed of runner ``index``'s env copies: the run's for the first, so that one
        runner is the local run; derived from it for the others and for replacements."""
        base = self.seed if base is None else base
        return runner_seed(base, index, restarts)

    def _restart(self, index: int, err: BaseException) -> None:
        """Start runner ``index`` again (on any node with room) after its actor died; its
        episodes under way are dropped."""
        self.restarts += 1
        self.lost += 1
        self.dropped += self.per_runner  # every copy holds one episode under way
        _, node, address = self.where[index]
        if self.restarts > self.cfg.max_restarts:
            self.broken = (
                f"env runner {index} on node {node[:12] or '?'} ({address or '?'}) died "
                f"({type(err).__name__}: {brief(err)}), and {self.restarts - 1} runner(s) were "
                f"already replaced in this run (backend.max_restarts: {self.cfg.max_restarts})")
            raise RunnerFailedError(self.broken) from None
        for k, v in self._stats[index].items():
            self._dead_stats[k] = self._dead_stats.get(k, 0) + v
        self._stats[index] = {}
        try:
            self._ray.kill(self.handles[index])
        except Exception:  # noqa: BLE001 - already gone
            pass
        handle = self._new(index, self.restarts)
        self.handles[index] = handle
        self._told.discard(index)
        self._wait_ready([handle])
        self._get(handle.reset.remote(self._runner_seed(index, self.restarts), self.steps), index)

    def _get(self, ref: Any, index: int | None) -> Any:
        """The value of ``ref``; an error raised in the runner is raised here as itself."""
        ray = self._ray
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as err:
            cause = getattr(err, "cause", None)
            if isinstance(cause, BaseException):
                raise cause from None
            raise

    # -- the runner interface ---------------------------------------------------------------
    def reset(self, seed: int | None) -> None:
        """Fresh episodes in every runner, with the counters at zero."""
        self._drain()
        self.env_steps = self.agent_steps = self.episodes = self.steps = 0
        self._told.clear()
        base = self.seed if seed is None else seed
        refs = [h.reset.remote(self._runner_seed(r, base=base), 0)
                for r, h in enumerate(self.handles)]
        for r, ref in enumerate(refs):
            try:
                self._get(ref, r)
            except self._ray.exceptions.RayActorError as err:
                self._restart(r, err)  # the new runner starts fresh episodes of its own

    @property
    def settled(self) -> bool:
        """No step was taken ahead of the loop: the runners are where the loop is."""
        return not self._queue and self._inflight is None

    def learned(self, seconds: float = 0.0) -> None:
        """The learner updated (in ``seconds``): its new state goes to the runners with their
        next block."""
        self.updates += 1
        self._learn_s += seconds

    def step(self, explore: bool = True) -> dict[str, Transitions]:
        if not self._queue:
            self._fetch(explore)
        step, version = self._queue.popleft()
        self._lag = max(self._lag, self.updates - version)
        self.steps += 1
        self.env_steps += step.env_steps
        self.agent_steps += step.agent_steps
        for ep in step.episodes:
            self.episodes += 1
            self.window.add(ep)
        for offset, said in step.said:
            for passenger, what in zip(self.passengers, said, strict=True):
                passenger.arrived(offset // self.per_runner, offset, what)
        return step.out

    def _block(self, ahead: int = 0) -> int:
        """Steps the next block may take; ``ahead``: env steps already taken but not yet
        handed to the loop."""
        at = self.env_steps + ahead
        left = [m - at for m in self.marks() if m > 0]
        n = self.cfg.steps_per_call
        if left:
            n = min(n, math.ceil(min(left) / self.num_envs)) if min(left) > 0 else 0
        hint = self.steps_to_update()
        return n if hint is None else min(n, max(1, hint))

    def _weights(self) -> Any:
        if self._sent == self.updates:
            return None
        self._sent = self.updates
        return self._ray.put(cpu_weights(self.algo, self.actors))

    def _submit(self, n: int, explore: bool) -> list[Any]:
        weights = self._weights()
        self._inflight_version = self.updates
        return [h.run.remote(n, explore, weights, self._orders(r))
                for r, h in enumerate(self.handles)]

    def _orders(self, index: int) -> list[Any] | None:
        """The passengers' orders for runner ``index``'s next block."""
        if not self.passengers:
            return None
        fresh = index not in self._told
        self._told.add(index)
        return [p.orders(index, fresh) for p in self.passengers]

    def _fetch(self, explore: bool) -> None:
        if self._inflight is None:
            n = self._block()
            if n <= 0:  # at a mark already: the loop asks for one more step
                n = 1
            self._inflight = self._submit(n, explore)
        refs, version = self._inflight, self._inflight_version
        self._inflight = None
        blocks: list[dict[str, Any] | None] = []
        waited = time.perf_counter()
        for r, ref in enumerate(refs):
            try:
                blocks.append(self._get(ref, r))
            except self._ray.exceptions.RayActorError as err:
                self._restart(r, err)
                blocks.append(None)
        self._wait_s += time.perf_counter() - waited
        if any(b is None for b in blocks):  # a replaced runner needs the weights again
            self._sent = -1
        self._merge(blocks, version)
        if explore and self.steps_to_update() is None:  # off-policy: sample while it learns
            ahead = sum(s.env_steps for s, _ in self._queue)
            n = self._block(ahead)
            if n > 0:
                self._inflight = self._submit(n, explore)

    def _merge(self, blocks: list[dict[str, Any] | None], version: int) -> None:
        live = [(r, b) for r, b in enumerate(blocks) if b is not None]
        for r, b in live:
            self._stats[r] = b["stats"]
        if live and live[0][0] == 0:
            set_states(self.gens, live[0][1]["rngs"])  # the first runner's draws go on here
        n = len(live[0][1]["steps"]) if live else 0
        for i in range(n):
            parts = [(r * self.per_runner, b["steps"][i]) for r, b in live]
            if len(parts) == 1 and parts[0][0] == 0:
                self._queue.append((parts[0][1], version))
                continue
            out: dict[str, list[Transitions]] = {}
            episodes: list[Episode] = []
            said: list[tuple[int, list[Any]]] = []
            for offset, s in parts:
                said += [(offset + first, what) for first, what in s.said]
                for pid, t in s.out.items():
                    out.setdefault(pid, []).append(t.shifted(offset) if offset else t)
                episodes += [dataclasses.replace(ep, env_index=ep.env_index + offset)
                             for ep in s.episodes]
            merged = Step({pid: concat(ts) for pid, ts in out.items()},
                          sum(s.env_steps for _, s in parts),
                          sum(s.agent_steps for _, s in parts), episodes, said)
            self._queue.append((merged, version))

    def _drain(self) -> None:
        """Forget steps taken ahead of the loop (before a reset)."""
        if self._inflight is not None:
            for r, ref in enumerate(self._inflight):
                try:
                    self._get(ref, r)
                except self._ray.exceptions.RayActorError as err:
                    self._restart(r, err)
            self._inflight = None
        self._queue.clear()

    # -- what the loop reads of the env ---------------------------------------------------------
    def stats(self) -> dict[str, float]:
        """Runner faults, the policy lag since the last report, and the envs' own fault counts."""
        out: dict[str, float] = dict(self._dead_stats)
        for s in self._stats:
            for k, v in s.items():
                out[k] = out.get(k, 0) + v
        out["runner_restarts"] = self.restarts
        out["policy_lag"] = self._lag
        self._lag = 0
        out.update(self._timings())
        out["ray/runners_lost"] = self.lost
        out["ray/episodes_dropped"] = self.dropped
        return out

    def _timings(self) -> dict[str, float]:
        """Where the learner's time went since the last row, per update and as a share."""
        now = time.perf_counter()
        since, updates = self._row
        per = max(self.updates - updates, 1)
        out = {"ray/sample_wait_s": self._wait_s / per, "ray/learn_s": self._learn_s / per,
               "ray/sample_share": min(self._wait_s / max(now - since, 1e-9), 1.0)}
        self._row = (now, self.updates)
        self._wait_s = self._learn_s = 0.0
        return out

    # -- checkpoints ----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """As a local runner's, for one runner (its copies are the local run's); else each
        runner's own, with the counters and window of all."""
        if not self.settled:
            raise RuntimeError("a checkpoint of the env runners is taken between blocks only")
        counters = [self.env_steps, self.agent_steps, self.episodes, self.steps]
        if self.broken is not None:  # the runners' episodes are lost: only the counts remain
            return {"counters": counters, "window": window_state(self.window),
                    "layout": self.layout, "tracker": {"ids": [-1] * self.num_envs},
                    "runners": None, "lost": self.broken}
        saved = [self._state(r) for r in range(len(self.handles))]
        if len(saved) == 1:
            state = saved[0]["state"]
            state.update(counters=counters, window=window_state(self.window), layout=self.layout)
            return state
        ids = [i for s in saved for i in s["state"]["tracker"]["ids"]]
        return {"counters": counters, "window": window_state(self.window), "layout": self.layout,
                "tracker": {"ids": ids}, "runners": saved}

    def _state(self, index: int) -> dict[str, Any]:
        """Runner ``index``'s state; a runner lost since its last block is started again
        first (its episodes then start afresh)."""
        try:
            return self._get(self.handles[index].state.remote(), index)
        except self._ray.exceptions.RayActorError as err:
            self._restart(index, err)
            self._sent = -1
            return self._get(self.handles[index].state.remote(), index)

    def env_state(self) -> Any:
        """The env copies' data, for one runner; None for several (kept in ``state_dict``) or
        when the runners were lost."""
        if len(self.handles) != 1 or self.broken is not None:
            return None
        return self._get(self.handles[0].env_state.remote(), 0)

    def restore_env(self, snapshot: Any) -> None:
        if len(self.handles) == 1 and snapshot is not None:
            self._get(self.handles[0].restore_env.remote(snapshot), 0)

    def load_state_dict(self, state: dict[str, Any], episodes: bool = True) -> None:
        """Continue from :meth:`state_dict` (or a local runner's, for one runner of as many
        copies); with ``episodes`` False only the counters and the window come back."""
        self.env_steps, self.agent_steps, self.episodes, self.steps = state["counters"]
        load_window(self.window, state["window"])
        self._sent = -1
        if not episodes:  # the runners were reset: their step numbers go on from here
            counters = {"counters": [0, 0, 0, self.steps], "window": window_state(Window({}))}
            refs = [h.load.remote(counters, None, False) for h in self.handles]
            for r, ref in enumerate(refs):
                self._get(ref, r)
            return
        if len(self.handles) == 1:
            self._get(self.handles[0].load.remote(state, None), 0)
            return
        refs = []
        for r, (h, saved) in enumerate(zip(self.handles, state["runners"], strict=True)):
            if saved["env"] is not None:
                self._get(h.restore_env.remote(saved["env"]), r)
            refs.append(h.load.remote(saved["state"], saved["rngs"] if r else None))
        for r, ref in enumerate(refs):
            self._get(ref, r)

    def close(self) -> None:
        from interplay.backends.ray.cluster import disconnect

        ray = self._ray if hasattr(self, "_ray") else None
        if ray is not None:
            for h in self.handles:
                try:
                    ray.kill(h)
                except Exception:  # noqa: BLE001 - already gone
                    pass
            self.handles = []
            if getattr(self, "_learner_slot", None) is not None:
                ray.kill(self._learner_slot)
                self._learner_slot = None
            if getattr(self, "_group", None) is not None:
                from ray.util.placement_group import remove_placement_group

                remove_placement_group(self._group)
                self._group = None
        disconnect(getattr(self, "_started", False))
