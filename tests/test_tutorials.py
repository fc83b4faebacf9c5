"""The tutorials and guides work as written: what they name exists, and their Python runs.

Every page in ``docs/`` and the README is read as a new user reads it: each file path and
link it names is there, each ``interplay COMMAND --flag`` is an option of that command, each
setting (``train.steps``, ``-s algo.lr=...``) is in the config reference, and each Python
block runs (callbacks on a short run of the example env; a whole experiment on a tiny
budget).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import interplay
from interplay import docs
from interplay.cli import _parser

ROOT = Path(__file__).resolve().parent.parent
GENERATED = {f"{name}" for name in docs.PAGES}
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
WRITTEN = [p for p in PAGES if p.name not in GENERATED]  # pages a person writes
SECTIONS = "env|algo|policies|train|log|checkpoint|league|hpo|backend"
TINY = ["train.steps=300", "train.test_frequency=150", "train.test_episodes=2", "env.num_envs=4",
        "log.every=150", "log.console=false", "log.tensorboard=false", "log.curve=false"]


def _blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.M | re.S)


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


# -- paths and links --------------------------------------------------------------------------
PATH = re.compile(r"(?<![\w/.-])((?:configs|examples|benchmarks|tests|docs|src)/[\w./-]*\w)")
LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_file_and_link_a_page_names_exists(page):
    text = page.read_text()
    missing = []
    for m in PATH.finditer(text):
        if "<" in m.group(1) or "*" in m.group(1):
            continue
        if not (ROOT / m.group(1)).exists():
            missing.append(f"line {_line(text, m.start())}: {m.group(1)}")
    for m in LINK.finditer(text):
        target, _, anchor = m.group(1).partition("#")
        if target.startswith(("http://", "https://")):
            continue
        path = (page.parent / target).resolve() if target else page
        if not path.exists():
            missing.append(f"line {_line(text, m.start())}: link {m.group(1)}")
        elif anchor and path.suffix == ".md" and anchor not in _anchors(path.read_text()):
            missing.append(f"line {_line(text, m.start())}: no heading #{anchor} in {path.name}")
    assert not missing, f"{page.name} names what is not there: {missing}"


def _anchors(text: str) -> set[str]:
    """GitHub's ids for a page's headings."""
    heads = re.findall(r"^#+ (.+)$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower().replace("`", "")).replace(" ", "-") for h in heads}


# -- command-line flags -----------------------------------------------------------------------
def _options() -> dict[str, set[str]]:
    return {name: {o for a in sub._actions for o in a.option_strings}
            for name, sub in docs._subcommands(_parser()).items()}


def test_every_command_and_flag_a_page_shows_exists():
    options, checked, wrong = _options(), 0, []
    for page in PAGES:
        text = page.read_text()
        for m in re.finditer(r"\binterplay (\w+)((?: +(?:\\\n *)?[^\s`|#]+)*)", text):
            command, args = m.group(1), m.group(2)
            if command not in options:  # prose: "interplay trains ..."
                continue
            for flag in re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", args):
                checked += 1
                if flag not in options[command]:
                    wrong.append(f"{page.name} line {_line(text, m.start())}: "
                                 f"interplay {command} has no {flag}")
    assert not wrong, wrong
    assert checked >= 20


# -- settings ---------------------------------------------------------------------------------
def _settings() -> set[str]:
    return set(re.findall(r"\| `([a-z_]+(?:\.[a-z_<>]+)+)` \|", docs.reference_md()))


def _is_setting(key: str, known: set[str]) -> bool:
    key = re.sub(r"^policies\.(?:<\w+>|\w+)\.", "policies.<policy>.", key)
    if key.startswith(("env.kwargs.", "policies.<policy>.model.", "policies.<policy>.algo.",
                       "algo.model.kwargs.")):
        return True
    return key in known or any(k.startswith(key + ".") for k in known)


KEY = re.compile(rf"(?:`|-s |\bset )((?:{SECTIONS})\.[a-z_<>]+(?:\.[a-z_<>]+)*)(?=[`=\s:,)])")
FILES = (".jsonl", ".json", ".yaml", ".yml", ".png", ".gif", ".md", ".py")  # hpo.jsonl: a file


def _shown_as_wrong(text: str, m: re.Match) -> bool:
    """A file name, or a misspelt key shown with the error it gets."""
    return m.group(1).endswith(FILES) or "did you mean" in text[m.end():m.end() + 40]


@pytest.mark.parametrize("page", WRITTEN, ids=lambda p: p.name)
def test_every_setting_a_page_names_is_in_the_reference(page):
    known, text = _settings(), page.read_text()
    wrong = [f"line {_line(text, m.start())}: {m.group(1)}" for m in KEY.finditer(text)
             if not _is_setting(m.group(1), known) and not _shown_as_wrong(text, m)]
    assert not wrong, f"{page.name} names settings docs/reference.md does not have: {wrong}"


def test_the_setting_check_finds_a_wrong_key():
    known = _settings()
    assert _is_setting("train.steps", known) and _is_setting("policies.hunters.fn", known)
    assert not _is_setting("train.stepz", known) and not _is_setting("algo.net.hidden", known)
    found = [m.group(1) for m in KEY.finditer("use `algo.net.hidden` or -s train.stepz=2")]
    assert found == ["algo.net.hidden", "train.stepz"]


# -- Python -----------------------------------------------------------------------------------
def _python_blocks() -> list[tuple[str, int, str]]:
    return [(p.name, i + 1, b) for p in WRITTEN if p.name != "README.md"
            for i, b in enumerate(_blocks(p.read_text(), "python"))]


def test_every_python_block_compiles():
    blocks = _python_blocks()
    assert len(blocks) >= 3
    for page, i, block in blocks:
        compile(block, f"{page} python block {i}", "exec")


def _params(word: str) -> list:
    return [pytest.param(*b, id=f"{b[0]}-{b[1]}") for b in _python_blocks() if word in b[2]]


@pytest.mark.parametrize("page,i,block", _params("Callbacks)"))
def test_callback_blocks_add_their_metrics_to_a_run(page, i, block, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples"))  # chase: the env the pages use
    scope: dict = {"interplay": interplay}
    exec(compile(block, f"{page} python block {i}", "exec"), scope)
    classes = [v for v in scope.values()
               if isinstance(v, type) and issubclass(v, interplay.Callbacks)
               and v is not interplay.Callbacks]
    assert classes
    cfg = interplay.load_config(
        [ROOT / "examples" / "chase.yaml"],
        overrides=[*TINY, "train.callbacks=[]", "train.target=null", "checkpoint.every=0"])
    result = interplay.train(cfg, tmp_path / "run", callbacks=[c() for c in classes])
    names = set(re.findall(r"add_metric\(\"([^\"]+)\"", block))
    assert names and names <= set(result.last_test), (page, names)


@pytest.mark.parametrize("page,i,block", _params("interplay.train("))
def test_experiment_blocks_run_on_a_tiny_budget(page, i, block, tmp_path, monkeypatch):
    """The block as written, from the repository root, with a tiny budget added to its config."""
    from interplay.experiment import evaluate as evaluate_module

    load, score = interplay.load_config, evaluate_module.evaluate
    monkeypatch.setattr(interplay, "load_config", lambda files=(), overrides=(), **kw: load(
        [ROOT / p for p in files], overrides=[*overrides, *TINY], **kw))
    monkeypatch.setattr(evaluate_module, "evaluate",
                        lambda *a, episodes=None, **kw: score(*a, episodes=2, **kw))
    monkeypatch.chdir(tmp_path)
    exec(compile(block, f"{page} python block {i}", "exec"), {"__name__": "__main__"})
    assert any(tmp_path.glob("runs/*/checkpoints/step_*"))


def test_the_own_env_tutorials_three_mappings_give_the_same_policies(tmp_path, monkeypatch):
    """Each YAML block of tutorial 3 maps chase's hunters to `hunters` and its runner to `runner`."""
    from interplay.run.mapping import assign

    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    import chase

    blocks = [b for b in _blocks((ROOT / "docs" / "tutorial_own_env.md").read_text(), "yaml")
              if b.startswith("policies:")]
    assert len(blocks) == 3
    agents = chase.Chase().possible_agents
    for i, block in enumerate(blocks):
        path = tmp_path / f"mapping{i}.yaml"
        path.write_text(block)
        cfg = interplay.load_config([path], overrides=["env.id=chase"])
        mapping = assign(agents, cfg.policies, cfg.train.policy_mapping_fn, cfg.train.self_play)
        assert mapping == {"hunter_0": "hunters", "hunter_1": "hunters", "runner_0": "runner"}, i
        assert cfg.policies["runner"].type == "scripted"
