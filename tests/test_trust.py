"""A run folder whose config names local code needs --trust for eval and resume."""

from __future__ import annotations

import re
import shutil
import sys
import uuid
from types import SimpleNamespace

import pytest
import yaml

from interplay.cli import main
from interplay.config.loading import load
from interplay.experiment.loop import train
from interplay.experiment.policies import load_policy
from interplay.experiment.run_store.trust import TrustError, code_fields, named_code, untrusted_code

QUIET = ["log.console=false", "log.tensorboard=false", "log.curve=false"]


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("run")
    train(load([], [*QUIET, "env.id=faulty_envs:flaky_counter", "env.kwargs.p=0.0",
                    "train.steps=60", "policies.a.agents=[a_0]", "policies.b.agents=[a_1]",
                    "policies.b.type=scripted", "policies.b.fn=trusted_helpers:first_action",
                    "train.callbacks=[trusted_helpers:Quiet]"]), run)
    return run


def _snapshot(run):
    return {p.relative_to(run): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("command", [["eval", "--episodes", "2"], ["resume", "-s", "train.steps=120"]])
def test_eval_and_resume_refuse_local_code_without_trust_listing_it(local_run, capsys, command):
    before = _snapshot(local_run)
    code = main([command[0], str(local_run), *command[1:]])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert f"{local_run / 'config.yaml'} names code that `interplay {command[0]}` would import" in err
    assert "faulty_envs  (env.id 'faulty_envs:flaky_counter')" in err
    assert ("trusted_helpers  (policies.b.fn 'trusted_helpers:first_action', "
            "train.callbacks[0] 'trusted_helpers:Quiet')") in err
    assert "--trust" in err
    assert _snapshot(local_run) == before  # nothing written, nothing lost


def test_with_trust_eval_and_resume_run(local_run, capsys):
    assert main(["eval", str(local_run), "--episodes", "2", "--trust"]) == 0
    assert (local_run / "eval.json").exists()
    assert main(["resume", str(local_run), "-s", "train.steps=120", "--trust"]) == 0


def test_installed_env_packages_and_built_in_names_need_no_trust():
    data = load([], ["env.id=mpe2.simple_spread_v3", "env.eval_id=spread",
                     "policies.p.type=scripted",
                     "policies.p.fn=pettingzoo.classic.connect_four_v3:env",
                     "train.policy_mapping_fn=interplay.envs.toy:shifting_crowd"]).model_dump()
    assert set(named_code(data)) == {"mpe2.simple_spread_v3", "pettingzoo.classic.connect_four_v3",
                                     "interplay.envs.toy"}
    assert untrusted_code(data) == {}


@pytest.mark.parametrize(("key", "value"), [
    ("env.id", "subprocess:run"),  # the standard library is code too
    ("env.eval_id", "my_envs.arena"),
    ("train.policy_mapping_fn", "numpy:zeros"),  # installed, but not an env package
    ("algo.name", "my_algos:Fancy"),
])
def test_every_place_that_names_code_is_listed(key, value):
    data = {"env": {"id": "spread"}}
    section, field = key.split(".")
    data.setdefault(section, {})[field] = value
    module = value.partition(":")[0]
    assert untrusted_code(data) == {module: [f"{key} {value!r}"]}


def test_a_local_file_shadowing_an_env_package_is_not_trusted(tmp_path, monkeypatch):
    (tmp_path / "mpe2").mkdir()
    (tmp_path / "mpe2" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "mpe2", raising=False)  # found anew, as a fresh process would
    assert untrusted_code({"env": {"id": "mpe2.simple_spread_v3"}}) == {
        "mpe2.simple_spread_v3": ["env.id 'mpe2.simple_spread_v3'"]}


def test_code_the_user_names_in_overrides_is_theirs():
    data = {"env": {"id": "my_envs:arena"}, "train": {"callbacks": ["my_cbs:Log"]}}
    assert set(untrusted_code(data, ["train.callbacks=[my_cbs:Log]"])) == {"my_envs"}


# -- every key that can name code, through every command that reads a stored config ----------

MARKER_MODULE = '''"""Writes a file the moment it is imported, so a test sees whether it was."""
import pathlib

pathlib.Path({flag!r}).write_text("imported")


def act(observation, agent_id):
    return 0


class Thing:
    pass
'''
TICTACTOE = ["algo.name=ippo", "env.id=pettingzoo.classic.tictactoe_v3", "train.self_play=true",
             "algo.rollout=20", *QUIET]
# How each kind of field names the marker module: ``run`` names a run folder whose config does.
VALUES = {"env": "{name}:Thing", "attr": "{name}:Thing", "player": "{name}:act"}
CODE_KEYS = [k for k, kind in code_fields().items() if kind != "cluster"]


@pytest.fixture(scope="module")
def trusted_run(tmp_path_factory):
    """A run whose config names only installed env packages and interplay's own code."""
    run = tmp_path_factory.mktemp("trusted") / "run"
    train(load([], [*TICTACTOE, "train.steps=40"]), run)
    return run


@pytest.fixture
def marker(tmp_path, monkeypatch):
    """A module (a fresh name each test, never imported before) that writes ``flag`` on import."""
    name = f"trust_marker_{uuid.uuid4().hex[:12]}"
    code = tmp_path / "code"
    code.mkdir()
    flag = tmp_path / f"{name}.imported"
    (code / f"{name}.py").write_text(MARKER_MODULE.format(flag=str(flag)))
    monkeypatch.syspath_prepend(str(code))
    return SimpleNamespace(name=name, flag=flag)


def _copy(run, dest):
    shutil.copytree(run, dest)
    return dest


def _edit(run, key, value):
    """Set dotted ``key`` (``<pid>`` standing for a policy id) in ``run``'s config.yaml, as a
    hand-edited or downloaded run folder would have it; a list key gets ``[value]``."""
    path = run / "config.yaml"
    data = yaml.safe_load(path.read_text())
    *parents, last = key.replace("<pid>", "p").split(".")
    node = data
    for part in parents:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[last] = [value] if isinstance(node.get(last), list) else value
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return key.replace("<pid>", "p") + ("[0]" if isinstance(node[last], list) else "")


def _naming(key, trusted_run, marker, dest):
    """A copy of ``trusted_run`` at ``dest`` whose config names the marker module at ``key``;
    a ``run`` key names another run folder whose config names it (as ``algo.name``)."""
    run = _copy(trusted_run, dest)
    kind = code_fields()[key]
    if kind == "run":
        other = _copy(trusted_run, dest.parent / f"{dest.name}_named")
        _edit(other, "algo.name", f"{marker.name}:Thing")
        value = str(other)
    else:
        value = VALUES[kind].format(name=marker.name)
    return run, _edit(run, key, value)


def _snapshot(run):
    return {p.relative_to(run): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def _refused(capsys, argv, shown_key):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and "--trust" in err
    assert shown_key in err
    return err


def test_the_keys_that_name_code_come_from_the_schema():
    fields = code_fields()
    assert {"env.id", "env.eval_id", "algo.name", "algo.model.type", "algo.critic_model.type",
            "policies.<pid>.fn", "policies.<pid>.from", "policies.<pid>.model.type",
            "policies.<pid>.algo.name", "policies.<pid>.algo.model.type", "train.callbacks",
            "train.policy_mapping_fn", "league.fixed", "hpo.opponents",
            "backend.address"} <= set(fields)
    assert set(fields.values()) <= {*VALUES, "run", "cluster"}  # each kind has a test value


@pytest.mark.parametrize("key", CODE_KEYS)
@pytest.mark.parametrize("command", ["resume", "eval", "hpo --resume"])
def test_a_stored_config_naming_code_is_refused_before_it_is_imported(
        trusted_run, marker, tmp_path, capsys, key, command):
    run, shown = _naming(key, trusted_run, marker, tmp_path / "run")
    before = _snapshot(run)
    argv = {"resume": ["resume", str(run)], "eval": ["eval", str(run), "--episodes", "2"],
            "hpo --resume": ["hpo", "--resume", str(run)]}[command]
    _refused(capsys, argv, shown)
    assert not marker.flag.exists()
    assert _snapshot(run) == before


@pytest.mark.parametrize("key", CODE_KEYS)
def test_a_search_members_config_naming_code_is_refused_on_hpo_resume(
        trusted_run, marker, tmp_path, capsys, key):
    search = _copy(trusted_run, tmp_path / "search")
    member, shown = _naming(key, trusted_run, marker, search / "members" / "m0")
    err = _refused(capsys, ["hpo", "--resume", str(search)], shown)
    assert f"{member / 'config.yaml'} names code" in err
    assert not marker.flag.exists()


@pytest.mark.parametrize("key", CODE_KEYS)
def test_load_policy_without_trust_refuses_a_run_naming_code(trusted_run, marker, tmp_path, key):
    run, shown = _naming(key, trusted_run, marker, tmp_path / "run")
    with pytest.raises(TrustError, match=re.escape(shown)):
        load_policy(run, trust=False)
    assert not marker.flag.exists()


@pytest.mark.parametrize("key", CODE_KEYS)
@pytest.mark.parametrize("how", ["eval --vs", "train from:", "train league.fixed"])
def test_a_run_folder_the_user_names_brings_its_config_under_the_check(
        trusted_run, marker, tmp_path, capsys, key, how):
    other, shown = _naming(key, trusted_run, marker, tmp_path / "other")
    fresh = tmp_path / "fresh"
    argv = {
        "eval --vs": ["eval", str(_copy(trusted_run, tmp_path / "mine")), "--vs", str(other),
                      "--episodes", "2"],
        "train from:": ["train", "--run-dir", str(fresh), *_sets(TICTACTOE),
                        "-s", "train.self_play=false", "-s", "policies.me.agents=[player_1]",
                        "-s", "policies.them.agents=[player_2]", "-s", "policies.them.type=frozen",
                        "-s", f"policies.them.from={other}"],
        "train league.fixed": ["train", "--run-dir", str(fresh), *_sets(TICTACTOE),
                               "-s", "league.snapshot_every=20", "-s", f"league.fixed=[{other}]"],
    }[how]
    _refused(capsys, argv, f"{other}/config.yaml: {shown}")
    assert not marker.flag.exists()
    assert not fresh.exists()


def _sets(overrides):
    return [part for o in overrides for part in ("-s", o)]


def test_with_trust_the_marker_module_is_imported(trusted_run, marker, tmp_path, capsys):
    """The check above would see an import: the same folder with --trust imports the module."""
    run, _ = _naming("algo.name", trusted_run, marker, tmp_path / "run")
    assert main(["hpo", "--resume", str(run), "--trust"]) == 2  # it holds no algorithm
    assert marker.flag.exists()
    assert "has no Settings class" in capsys.readouterr().err


def test_a_stored_ray_cluster_address_needs_trust_unless_the_user_gives_it(
        trusted_run, tmp_path, capsys):
    run = _copy(trusted_run, tmp_path / "run")
    _edit(run, "backend.address", "10.1.2.3:6379")
    _refused(capsys, ["resume", str(run)], "the Ray cluster at 10.1.2.3:6379  "
                                           "(backend.address '10.1.2.3:6379')")
    data = yaml.safe_load((run / "config.yaml").read_text())
    assert untrusted_code(data, ["backend.address=10.1.2.3:6379"]) == {}
    assert main(["resume", str(run), "-s", "backend.address=", "-s", "train.steps=60"]) == 0
    for local in ("127.0.0.1:6379", "ray://localhost:10001", ""):
        data["backend"]["address"] = local
        assert untrusted_code(data) == {}


def test_run_folders_naming_each_other_are_read_once_each(trusted_run, marker, tmp_path, capsys):
    a, b = _copy(trusted_run, tmp_path / "a"), _copy(trusted_run, tmp_path / "b")
    _edit(a, "policies.<pid>.from", str(b))
    _edit(b, "league.fixed", str(a))
    _edit(b, "train.callbacks", f"{marker.name}:Thing")
    err = _refused(capsys, ["eval", str(a), "--episodes", "2"],
                   f"policies.p.from '{b}' -> {b}/config.yaml: train.callbacks[0]")
    assert err.count(marker.name) == 2  # the module and its value, once
    assert not marker.flag.exists()
