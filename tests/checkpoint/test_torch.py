"""PyTorch state dicts through the store (runs where torch is installed)."""

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch==2.13.0 runs this)")

from gpu_policy.checkpoint import (  # noqa: E402
    CheckpointStore, TorchSerializer, restore_training_state, training_state)


def test_model_and_optimizer_round_trip(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(3, 4)).sum().backward()
    optimizer.step()
    store = CheckpointStore(str(tmp_path), serializer=TorchSerializer())
    store.save(1, training_state(model, optimizer))
    other = torch.nn.Linear(4, 2)
    other_opt = torch.optim.SGD(other.parameters(), lr=0.1, momentum=0.9)
    restore_training_state(store.load(store.latest()), other, other_opt)
    for a, b in zip(model.parameters(), other.parameters()):
        assert torch.equal(a, b)
    assert other_opt.state_dict()["state"].keys() == optimizer.state_dict()["state"].keys()
