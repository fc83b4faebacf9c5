"""The learner beside Ray env runners: the weights runners get are CPU tensors, GPUs asked for
a learner on the CPU are refused before anything is built, and a search member run again
starts from its generation's checkpoint. The Ray run on a GPU is marked ``gpu``."""

from __future__ import annotations

import pytest
import torch
from helpers import QUIET

from interplay.backends.ray.acting import cpu_weights
from interplay.backends.ray.cluster import check_learner_device
from interplay.config.schema import BackendConfig
from interplay.errors import ConfigError
from interplay.experiment.loop import train
from interplay.experiment.run_store.checkpoint import latest_valid, save_checkpoint


class _Holder:
    def __init__(self, device: str):
        self.device = device

    def state_dict(self) -> dict:
        net = torch.nn.Linear(3, 2).to(self.device)
        return {"nets": {"pi": net.state_dict()}, "moments": [torch.ones(2, device=self.device)],
                "steps": 7, "name": "x"}


def _devices(tree) -> set[str]:
    if isinstance(tree, torch.Tensor):
        return {tree.device.type}
    if isinstance(tree, dict):
        tree = list(tree.values())
    if isinstance(tree, list | tuple):
        return set().union(*(_devices(v) for v in tree)) if tree else set()
    return set()


def _sent(device: str):
    algo, actors = cpu_weights(_Holder(device), {"agent": _Holder(device), "fixed": object()})
    assert set(actors) == {"agent"}  # an actor without state sends none
    assert algo["steps"] == 7 and algo["name"] == "x"
    return algo, actors


def test_what_runners_get_is_on_the_cpu():
    algo, actors = _sent("cpu")
    assert _devices(algo) == _devices(actors) == {"cpu"}


@pytest.mark.gpu
def test_what_runners_get_of_a_cuda_learner_is_on_the_cpu():
    algo, actors = _sent("cuda")
    assert _devices(algo) == _devices(actors) == {"cpu"}


def test_gpus_for_a_learner_on_the_cpu_are_refused():
    with pytest.raises(ConfigError, match=r"gpus_for_learner is 1, but the learner would run on "
                                          r"cpu \(train.device: cpu"):
        check_learner_device(BackendConfig(name="ray", gpus_for_learner=1), "cpu", "cpu")
    check_learner_device(BackendConfig(name="ray"), "cpu", "cpu")
    check_learner_device(BackendConfig(name="ray", gpus_for_learner=0.5), "cuda", "cuda")


def test_a_member_run_again_loads_its_generation_s_checkpoint(tmp_path):
    for step in (32, 64):
        save_checkpoint(tmp_path, step, {"step": step})
    assert latest_valid(tmp_path, upto=40).name.endswith("32")
    assert latest_valid(tmp_path, upto=10) is None
    assert latest_valid(tmp_path).name.endswith("64")


@pytest.mark.gpu
@pytest.mark.slow
def test_a_learner_on_a_gpu_beside_cpu_runners(tmp_path):
    pytest.importorskip("ray")
    from interplay.backends.ray.cluster import connect, disconnect
    from interplay.config.loading import load

    started = connect(BackendConfig(name="ray"), num_cpus=2)
    try:
        import ray

        assert ray.cluster_resources().get("GPU", 0) >= 1
        result = train(load([], ["env.id=spread", "env.num_envs=2", "algo.name=ippo",
                                 "algo.rollout=16", "train.steps=128", "train.device=cuda",
                                 "train.test_frequency=-1", "backend.name=ray",
                                 "backend.num_env_runners=2", "backend.envs_per_runner=1",
                                 "backend.gpus_for_learner=1", *QUIET]), tmp_path)
    finally:
        disconnect(started)
    assert result.env_steps == 128 and result.rows[-1]["ray/learn_s"] > 0


def test_the_cli_refuses_gpus_for_a_cpu_learner_before_any_step(tmp_path, capsys):
    pytest.importorskip("ray")
    from interplay.cli import main

    run = tmp_path / "run"
    code = main(["train", "--run-dir", str(run), "-s", "backend.name=ray", "-s",
                 "backend.gpus_for_learner=1",
                 "-s", "train.device=cpu", *[a for s in QUIET for a in ("-s", s)]])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "error: backend.gpus_for_learner is 1, but the learner would run on cpu" in err
    assert not (run / "metrics.jsonl").exists()
