"""A run folder whose config names local code needs --trust for eval and resume."""

from __future__ import annotations

import sys

import pytest

from interplay.cli import main
from interplay.config.schema import load
from interplay.experiment.loop import train
from interplay.experiment.trust import named_code, untrusted_code

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
