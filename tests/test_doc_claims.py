"""What the README and the guides promise, checked against the code: every ``interplay.X``
they name exists, every callback hook and method they show has the arguments shown, what they
say each algorithm takes (turn-based envs, continuous actions) is what it declares, every YAML
block is a valid config (and the whole ones train a few steps), and the claims about policy
mapping and resume hold."""

from __future__ import annotations

import importlib
import inspect
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import interplay
from interplay.algos import REGISTRY
from interplay.experiment.loop import Experiment
from interplay.run.runner import Runner

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
GENERATED = {"reference.md", "metrics.md", "cli.md"}
WRITTEN = [p for p in PAGES if p.name not in GENERATED]
QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false", "checkpoint.every=0"]


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _ours(line: str) -> str:
    """What of a page's line speaks of interplay: a table row's last cell (the others name the
    library a guide comes from, or the row's subject), else the whole line."""
    if line.startswith("|"):
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        return cells[-1]
    return line


# -- names --------------------------------------------------------------------------------------
NAME = re.compile(r"(?<![\w./-])interplay((?:\.[A-Za-z_]\w*)+)(?::([A-Za-z_]\w*))?")
FILE_SUFFIXES = {"json", "jsonl", "yaml", "yml", "pt", "md", "txt", "png", "gif", "onnx", "lock"}
"""``interplay.json`` and the like are file names, not names in the package."""


def resolve(dotted: str) -> object:
    """The module or attribute ``dotted`` names (``interplay.envs.check.check_env``)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def names(text: str) -> Iterator[re.Match]:
    """Each ``interplay.X`` a page mentions, file names (``interplay.json``) left out."""
    for m in NAME.finditer(text):
        if m.group(1).rpartition(".")[2] not in FILE_SUFFIXES or m.group(2):
            yield m


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_interplay_name_a_page_mentions_exists(page):
    text, wrong = page.read_text(), []
    for m in names(text):
        dotted = "interplay" + m.group(1)
        try:
            obj = resolve(dotted)
            if m.group(2):
                getattr(obj, m.group(2))
        except (ImportError, AttributeError) as err:
            wrong.append(f"line {_line(text, m.start())}: {m.group(0)} ({err})")
    assert not wrong, f"{page.name} names what interplay does not have: {wrong}"


def test_the_name_check_finds_a_missing_name():
    assert resolve("interplay.evaluate") is interplay.evaluate
    assert resolve("interplay.envs.check.check_env")
    with pytest.raises(AttributeError):
        resolve("interplay.evaluate_all")
    assert [m.group(0) for m in names("`.interplay.lock`, interplay.train(cfg), `interplay.json` "
                                      "in the file, interplay.evaluate_all")] == [
        "interplay.train", "interplay.evaluate_all"]


# -- callbacks and methods ----------------------------------------------------------------------
HOOK = re.compile(r"\b(on_[a-z_]+)(?:\(([^)]*)\))?")
CALL = re.compile(r"\b(runner\.experiment|runner|episode)\.([a-z_]+)\(")
RECEIVERS = {"runner.experiment": Experiment, "runner": Runner, "episode": interplay.Episode}


def _parameters(fn: object) -> set[str]:
    return set(inspect.signature(fn).parameters) - {"self"}  # type: ignore[arg-type]


@pytest.mark.parametrize("page", WRITTEN, ids=lambda p: p.name)
def test_every_callback_hook_a_page_shows_exists_with_those_arguments(page):
    text, wrong = page.read_text(), []
    for n, line in enumerate(text.splitlines(), 1):
        for m in HOOK.finditer(_ours(line)):
            hook = getattr(interplay.Callbacks, m.group(1), None)
            if hook is None:
                wrong.append(f"line {n}: interplay.Callbacks has no {m.group(1)}")
                continue
            shown = {a.strip() for a in (m.group(2) or "").split(",")} - {"", "self", "*", "..."}
            if shown - _parameters(hook):
                wrong.append(f"line {n}: {m.group(1)} takes {sorted(_parameters(hook))}, "
                             f"not {sorted(shown)}")
    assert not wrong, f"{page.name}: {wrong}"


@pytest.mark.parametrize("page", WRITTEN, ids=lambda p: p.name)
def test_every_method_a_page_calls_on_a_runner_or_episode_exists(page):
    text, wrong = page.read_text(), []
    for m in CALL.finditer(text):
        if not callable(getattr(RECEIVERS[m.group(1)], m.group(2), None)):
            wrong.append(f"line {_line(text, m.start())}: {m.group(1)}.{m.group(2)}")
    assert not wrong, f"{page.name} calls methods that do not exist: {wrong}"


# -- what each algorithm takes ------------------------------------------------------------------
def _algorithms(text: str) -> set[str]:
    """Registered algorithms a piece of text names: `ippo` in backticks, or MATD3 in capitals."""
    ticked = set(re.findall(r"`([a-z0-9]+)`", text))
    capitals = {w.lower() for w in re.findall(r"\b[A-Z][A-Z0-9]+\b", text)}
    return (ticked | capitals) & set(REGISTRY)


def test_the_readme_table_of_algorithms_is_what_each_declares():
    text = (ROOT / "README.md").read_text()
    head = next(line for line in text.splitlines() if line.startswith("| algorithm |"))
    columns = [c.strip() for c in head.strip("|").split("|")]
    turns, boxes = columns.index("turn-based (AEC)"), columns.index("continuous actions")
    checked = set()
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        if not line.startswith("| `") or len(cells) != len(columns):
            continue
        for name in re.findall(r"`([a-z0-9]+)`", cells[0]):
            if name not in REGISTRY:
                continue
            cls = REGISTRY[name]
            assert cells[turns].startswith("yes") == cls.turn_based, (name, cells[turns])
            assert cells[boxes].startswith("yes") == ("box" in cls.action_kinds), (
                name, cells[boxes])
            checked.add(name)
    assert checked == set(REGISTRY), f"the README's table leaves out {set(REGISTRY) - checked}"


@pytest.mark.parametrize("page", WRITTEN, ids=lambda p: p.name)
def test_what_a_page_says_of_turn_based_envs_is_what_each_algorithm_declares(page):
    """A sentence that says some algorithms take AEC envs as they are names only algorithms
    that can learn from them; one that says they are refused names only those that cannot. In
    a guide, a sentence that names none speaks of the algorithm of the guide's own config."""
    wrong, own = [], _guide_algorithm(page)
    for n, line in enumerate(page.read_text().splitlines(), 1):
        for sentence in re.split(r"(?<=\.)\s+(?=[`A-Z])", _ours(line)):
            if not re.search(r"AEC|turn-based|in turns", sentence):
                continue
            # "MADDPG on a turn-based game, DQN on continuous actions": only MADDPG's is about turns
            near = re.findall(r"(`?\w+`?) on an? (?:turn-based|AEC)", sentence)
            named = _algorithms(" ".join(near)) if near else _algorithms(sentence)
            named = named or ({own} if own else set())
            if "refuse" in sentence:
                wrong += [f"line {n}: {a} is said to refuse them but learns from them"
                          for a in named if REGISTRY[a].turn_based]
            elif "as they are" in sentence:
                wrong += [f"line {n}: {a} is said to take them but refuses them"
                          for a in named if not REGISTRY[a].turn_based]
    assert not wrong, f"{page.name}: {wrong}"


def _guide_algorithm(page: Path) -> str | None:
    """The algorithm of the config a guide (``from_<name>.md``) is built on."""
    config = ROOT / "configs" / "guides" / f"{page.stem.removeprefix('from_')}.yaml"
    if not page.stem.startswith("from_") or not config.is_file():
        return None
    return interplay.load_config([config]).algo.name


def test_the_agilerl_guide_says_what_its_own_algorithm_does_with_turn_based_envs():
    name = interplay.load_config([ROOT / "configs" / "guides" / "agilerl.yaml"]).algo.name
    row = next(line for line in (ROOT / "docs" / "from_agilerl.md").read_text().splitlines()
               if "AsyncAgentsWrapper" in line)
    refusing = [s for s in re.split(r"(?<=\.)\s+", _ours(row)) if "refuse" in s]
    assert not REGISTRY[name].turn_based and any(name in _algorithms(s) for s in refusing)


def test_an_algorithm_that_cannot_take_turns_is_refused_on_a_turn_based_env(tmp_path):
    cfg = interplay.load_config([], ["env.id=pettingzoo.classic.tictactoe_v3", "algo.name=matd3",
                                     "train.steps=10", *QUIET])
    with pytest.raises(interplay.ConfigError, match=r"algo.name: matd3 .* turn-based"):
        interplay.train(cfg, tmp_path / "run")


# -- YAML blocks --------------------------------------------------------------------------------
def _yaml_blocks() -> list:
    out = []
    for page in WRITTEN:
        for i, block in enumerate(re.findall(r"^```yaml\n(.*?)^```", page.read_text(),
                                             re.M | re.S)):
            out.append(pytest.param(page.name, block, id=f"{page.name}-{i + 1}"))
    return out


SLOW_ENVS = ("pistonball",)  # trained by the image tests; here only validated


@pytest.mark.parametrize("page,block", _yaml_blocks())
def test_every_yaml_block_is_a_config_and_a_whole_one_trains(page, block, tmp_path,
                                                              monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    path = tmp_path / "block.yaml"
    path.write_text(block)
    cfg = interplay.load_config([path])  # raises, naming the key, on any wrong setting
    if not block.startswith("env:") or any(e in cfg.env.id for e in SLOW_ENVS):
        return
    tiny = ["train.steps=200", "train.test_frequency=100", "train.test_episodes=1",
            "env.num_envs=2", "log.every=100", "checkpoint.every=0", "checkpoint.at_end=false",
            "train.target=null", *QUIET]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = interplay.train(interplay.load_config([path], tiny), tmp_path / "run")
    assert result.env_steps >= 200


# -- policy mapping -----------------------------------------------------------------------------
CALLS: list[tuple[str, object, bool]] = []
STEPPED = [False]


def rllib_style(agent_id: str, episode: object, **kwargs: object) -> str:
    """RLlib's ``policy_mapping_fn`` signature."""
    CALLS.append((agent_id, episode, STEPPED[0]))
    return "hunters" if agent_id.startswith("hunter") else "runner"


class Stepped(interplay.Callbacks):
    def on_episode_step(self, *, episode, env_index, runner):
        STEPPED[0] = True


def test_the_mapping_function_is_called_per_agent_at_every_episode_start(tmp_path, monkeypatch):
    """What docs/from_rllib.md says: RLlib's signature is called at the start of every episode
    in every copy, with the episode, never in the middle of one."""
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    CALLS.clear()
    STEPPED[0] = False
    cfg = interplay.load_config([ROOT / "configs" / "guides" / "rllib.yaml"], [
        "train.policy_mapping_fn=test_doc_claims:rllib_style", "train.callbacks=[]",
        "train.steps=100", "train.test_frequency=-1", "env.num_envs=2", "train.target=null",
        "log.every=100", *QUIET])
    starts: list[tuple[int, int]] = []

    class Starts(interplay.Callbacks):
        def on_episode_start(self, *, episode, env_index, runner):
            starts.append((episode.id_, env_index))

    CALLS.clear()  # the calls made while the run is built ask about stand-in episodes
    interplay.train(cfg, tmp_path / "run", callbacks=[Stepped(), Starts()])
    assert STEPPED[0] and CALLS
    asked = {(episode.id_, episode.env_index) for _, episode, _ in CALLS}
    assert set(starts) <= asked and len(starts) > 2
    assert len(CALLS) % 3 == 0
    for i in range(0, len(CALLS), 3):  # every agent, once per episode, as it starts
        block = CALLS[i:i + 3]
        assert [a for a, _, _ in block] == ["hunter_0", "hunter_1", "runner_0"]
        assert block[0][1] is block[1][1] is block[2][1]


# -- resume -------------------------------------------------------------------------------------
def test_the_rlhive_guide_resumes_exactly_as_its_row_says(tmp_path):
    """docs/from_rlhive.md: a resumed run of its config (copies in this process) goes on as
    the straight run does, row for row."""
    from helpers import read_metrics

    guide = ROOT / "configs" / "guides" / "rlhive.yaml"
    assert interplay.load_config([guide]).env.vectorization == "sync"
    small = ["env.num_envs=2", "train.test_frequency=-1", "log.every=100",
             "train.target=null", "algo.learning_starts=50", "checkpoint.at_end=true",
             "log.console=false", "log.tensorboard=false", "log.curve=false"]
    interplay.train(interplay.load_config([guide], [*small, "train.steps=300"]),
                    tmp_path / "straight")
    interplay.train(interplay.load_config([guide], [*small, "train.steps=150"]), tmp_path / "cut")
    interplay.resume(tmp_path / "cut", ["train.steps=300"])

    def rows(run: Path) -> list[dict]:
        keep = ("env_steps", "episodes", "episode_return_mean", "episode_len_mean")
        return [{k: r.get(k) for k in keep} for r in read_metrics(run) if r["phase"] == "train"]

    assert rows(tmp_path / "cut") == rows(tmp_path / "straight")


# -- evolutionary search (docs/from_agilerl.md) -------------------------------------------------
def test_the_mutations_the_agilerl_guide_names_are_the_search_s_and_leave_critics_alone():
    """The row's weights are the kinds ``hpo.mutation`` has, and an architecture mutation changes
    ``algo.model`` only: MATD3's critics (``algo.critic_model``) are never mutated."""
    import numpy as np

    from interplay.config.schema import MutationConfig
    from interplay.population.hpo import mutate_arch

    row = next(line for line in (ROOT / "docs" / "from_agilerl.md").read_text().splitlines()
               if line.startswith("| `Mutations(no_mutation"))
    assert set(re.findall(r"`(\w+)`", _ours(row))) >= set(MutationConfig.model_fields)
    cfg = interplay.load_config([ROOT / "configs" / "guides" / "agilerl.yaml"])
    rng = np.random.default_rng(0)
    changed = 0
    for _ in range(20):
        child, _ = mutate_arch(cfg, rng, image=bool(rng.random() < 0.5))
        assert child.algo.critic_model == cfg.algo.critic_model
        changed += child.algo.model != cfg.algo.model
    assert changed == 20
