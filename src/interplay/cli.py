"""The ``interplay`` command: train, check, config."""

from __future__ import annotations

import argparse
import errno
import sys
from collections.abc import Sequence

from interplay.errors import ConfigError

TRUST_RUNS = ("import and run the modules named by the configs of run folders this config "
              "names (policies.*.from, league.fixed) even when they are not installed env "
              "packages")


TRUST_RUN_CONFIG = ("import and run the modules the run's config names (env, policies, "
                    "callbacks...) even when they are not installed env packages")


def _overrides(parser: argparse.ArgumentParser, help: str) -> None:
    """The ``-s KEY=VALUE`` option, repeatable."""
    parser.add_argument("-s", "--set", action="append", default=[], metavar="KEY=VALUE",
                        help=help)


def _trust(parser: argparse.ArgumentParser, help: str) -> None:
    """The ``--trust`` option: import what the configs name though no env package holds it."""
    parser.add_argument("--trust", action="store_true", help=help)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="interplay", description="Multi-agent reinforcement learning on PettingZoo envs.",
        epilog="Run 'interplay COMMAND --help' for a command's options; every setting a config "
               "takes is in docs/reference.md.")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, about: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=about, description=about[0].upper() + about[1:] + ".")

    t = command("train", "train as the config says and write a run folder")
    t.add_argument("configs", nargs="*", help="YAML files, merged in order")
    _overrides(t, "override a setting, e.g. -s train.steps=20000 (repeatable)")
    t.add_argument("--run-dir", help="where to write the run folder (default: log.dir/<name>)")
    t.add_argument("--overwrite", action="store_true",
                   help="if the run folder already holds a run, delete it and start again")
    _trust(t, TRUST_RUNS)

    r = command("resume", "continue a run from its newest valid checkpoint")
    r.add_argument("run_dir", help="the run folder to continue")
    _overrides(r, "change a setting, e.g. -s train.steps=2000000 (repeatable)")
    r.add_argument("--checkpoint", help="a checkpoints/step_* folder to resume from instead")
    _trust(r, TRUST_RUN_CONFIG)

    e = command("eval", "score a run's policies without exploration")
    e.add_argument("run_dir", help="the run folder whose policies to score")
    e.add_argument("--checkpoint", help="a checkpoints/step_* folder (default: the newest valid)")
    e.add_argument("--episodes", type=int, default=20,
                   help="episodes to play, or games with --vs (default: %(default)s)")
    e.add_argument("--env", help="another env id with the same spaces, e.g. mpe2.simple_spread_v3")
    e.add_argument("--render", metavar="OUT.gif", help="also write a GIF of one episode")
    e.add_argument("--seed", type=int, help="seed of the eval episodes (default: from the run's)")
    e.add_argument("--out", help="where to write the report (default: RUN_DIR/eval.json)")
    e.add_argument("--vs", metavar="OPPONENT",
                   help="two-player games: play the trained policy on each seat (half the "
                        "games each) against this opponent and report win/draw/loss rates: "
                        "random, module:function, snapshot_<env steps> (of this run's "
                        "league), or another RUN_DIR[:policy_id], checkpoint or snapshot file")
    e.add_argument("--opening", type=int, default=0, metavar="K",
                   help="with --vs: draw the first K moves of each game uniformly from the "
                        "legal ones (seeded, the same for every opponent and seat), so that "
                        "deterministic players do not replay one game (default: %(default)s)")
    _overrides(e, "change a setting of the run's config for this eval, e.g. "
                  "-s env.kwargs.max_cycles=50 (repeatable)")
    _trust(e, "import and run the modules the run's config names (env, policies, "
              "callbacks...), and those of a --vs run, even when they are not "
              "installed env packages")

    c = command("check", "check an env against PettingZoo's API and interplay's rules")
    c.add_argument("env_id", help="module path, registered name, or module:function")
    _overrides(c, "env settings, e.g. -s env.kwargs.max_cycles=10 (repeatable)")
    c.add_argument("--cycles", type=int, default=200,
                   help="env steps to try (default: %(default)s)")

    h = command("hpo", "evolutionary hyper-parameter search over a population of learners")
    h.add_argument("configs", nargs="*", help="YAML files, merged in order (hpo: section)")
    _overrides(h, "override a setting, e.g. -s hpo.population=6 (repeatable)")
    h.add_argument("--run-dir", help="where to write the search (default: log.dir/<name>)")
    h.add_argument("--resume", metavar="RUN_DIR",
                   help="continue the search in this folder where it stopped (with "
                        "-s hpo.generations=N, on to N generations)")
    h.add_argument("--overwrite", action="store_true",
                   help="if the folder already holds a search, delete it and start again")
    _trust(h, "import and run the modules the search folder's configs name (with "
              "--resume), and those of run folders the config names")

    x = command("exploit", "train a fresh best response against a run's final policy and "
                           "report how often it wins: the lower, the harder to exploit")
    x.add_argument("run_dir", help="the run folder whose final policy to exploit")
    x.add_argument("--steps", type=int, default=100_000,
                   help="env steps the best response trains for (default: %(default)s)")
    x.add_argument("--policy", help="the run's trained policy to exploit (default: its only one)")
    x.add_argument("--games", type=int, default=200,
                   help="greedy games the best response then plays, half on each seat "
                        "(default: %(default)s)")
    x.add_argument("--opening", type=int, default=2, metavar="K",
                   help="random legal moves that open each of those games, so that two "
                        "deterministic players do not replay one game (default: %(default)s)")
    x.add_argument("--seed", type=int, help="seed of the best response (default: the run's)")
    x.add_argument("--out", help="where to write the report (default: RUN_DIR/exploit.json)")
    _overrides(x, "change a setting of the best response, e.g. -s env.num_envs=8 "
                  "(repeatable)")
    _trust(x, TRUST_RUN_CONFIG)

    x = command("export", "write a trained policy as a TorchScript or ONNX file that acts "
                          "greedily without interplay")
    x.add_argument("run_dir", help="the run folder (or a checkpoint folder or league snapshot)")
    x.add_argument("--policy", help="the policy to export (default: the run's only trained one)")
    x.add_argument("--format", choices=["torchscript", "onnx"], default="torchscript",
                   help="torchscript (torch.jit.load) or onnx (onnxruntime; needs the onnx "
                        "extra) (default: %(default)s)")
    x.add_argument("--out", required=True, help="the file to write")
    x.add_argument("--checkpoint", help="a checkpoints/step_* folder (default: the newest valid)")

    lg = command("league", "show a league run's pool and ratings, and draw ratings.png")
    lg.add_argument("run_dir", help="the run folder of a league run")

    s = command("config", "print the resolved config with each setting's doc")
    s.add_argument("configs", nargs="*", help="YAML files, merged in order")
    _overrides(s, "override a setting, e.g. -s algo.name=dqn to see DQN's settings "
                  "(repeatable)")
    s.add_argument("--show", action="store_true", help="print the resolved config (the default)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except KeyboardInterrupt as err:
        from interplay.experiment.run_store.interrupt import Interrupted

        if isinstance(err, Interrupted):
            print(f"interrupted: {err}", file=sys.stderr)
            return 128 + err.signum
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # every known failure is phrased for the user
        from interplay.errors import USER_ERRORS

        if isinstance(err, USER_ERRORS) or _is_disk_error(err):
            print(f"error: {err}", file=sys.stderr)
            return 2
        raise


def _is_disk_error(err: Exception) -> bool:
    """A full disk, a quota, a read-only disk, no permission: the message names the file."""
    return isinstance(err, OSError) and err.errno in (
        errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM)


def _dispatch(args: argparse.Namespace) -> int:
    from interplay import config as config_mod

    if args.command == "train":
        from interplay.experiment.loop import train

        cfg = config_mod.load(args.configs, args.set)
        result = train(cfg, args.run_dir, overwrite=args.overwrite, trust=args.trust)
        print(f"run folder: {result.run_dir}")
        return 0
    if args.command == "resume":
        from interplay.experiment.loop import resume

        result = resume(args.run_dir, args.set, args.checkpoint, trust=args.trust)
        print(f"run folder: {result.run_dir}")
        return 0
    if args.command == "eval":
        from interplay.experiment.evaluate import evaluate

        evaluate(args.run_dir, checkpoint=args.checkpoint, episodes=args.episodes,
                 env_id=args.env, overrides=args.set, render=args.render, seed=args.seed,
                 out=args.out, vs=args.vs, trust=args.trust, opening=args.opening)
        return 0
    if args.command == "check":
        from interplay.envs.check import check_env

        cfg = config_mod.load([], [f"env.id={args.env_id}", *args.set])
        problems = check_env(cfg, cycles=args.cycles)
        return 1 if problems else 0
    if args.command == "exploit":
        from interplay.population.league.exploit import exploit

        exploit(args.run_dir, steps=args.steps, policy=args.policy, games=args.games,
                opening=args.opening, seed=args.seed, overrides=args.set, out=args.out,
                trust=args.trust)
        return 0
    if args.command == "export":
        from interplay.experiment.export import export_policy

        path = export_policy(args.run_dir, args.out, args.format, args.policy, args.checkpoint)
        print(f"wrote {path}")
        return 0
    if args.command == "league":
        from interplay.population.league.exploiters import exploiter_report
        from interplay.population.league.report import league_report

        league_report(args.run_dir)
        exploiter_report(args.run_dir)
        return 0
    if args.command == "hpo":
        from interplay.population.hpo import run_search

        best = run_search(args.configs, args.set, args.run_dir, args.resume,
                          overwrite=args.overwrite, trust=args.trust)
        print(f"best member: {best}")
        return 0
    if args.command == "config":
        cfg = config_mod.load(args.configs, args.set)
        print(config_mod.describe(cfg))
        return 0
    raise ConfigError(f"unknown command {args.command!r}")


if __name__ == "__main__":
    sys.exit(main())
