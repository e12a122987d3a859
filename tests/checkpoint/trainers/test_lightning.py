"""The Lightning callback against the real Trainer on the CPU: a few-parameter module saves through
`trainer.save_checkpoint` when asked, pauses, and trains on after the withdrawal, or ends on SIGTERM
(Lightning's own SIGTERMException) with exit status 143 and resumes from last.ckpt losing no step."""

import signal

import pytest

torch = pytest.importorskip("torch", reason="`make test` runs these in .venv-trainers")
L = pytest.importorskip("lightning.pytorch")

from gpu_policy.checkpoint.lightning import GpuPolicyCallback  # noqa: E402
from tests.checkpoint.trainers.conftest import REQUESTED, Controller, guard_for  # noqa: E402

MAX_STEPS, ASK_AFTER = 6, 3


class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
        self.seen: list[int] = []

    def training_step(self, batch, batch_idx):
        self.seen.append(self.global_step)
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        g = torch.Generator().manual_seed(0)
        x = torch.randn(64, 4, generator=g)
        return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=4)


class AskAfter(L.Callback):
    """The controller's request lands during batch `ASK_AFTER` (global step ASK_AFTER after it)."""

    def __init__(self, controller):
        self.controller = controller

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if trainer.global_step == ASK_AFTER:
            self.controller.ask()


def fit(tmp_path, callbacks, ckpt_path=None, checkpointing=False):
    torch.manual_seed(0)
    model = Tiny()
    trainer = L.Trainer(max_steps=MAX_STEPS, accelerator="cpu", logger=False, enable_progress_bar=False,
                        enable_model_summary=False, enable_checkpointing=checkpointing,
                        default_root_dir=str(tmp_path), callbacks=callbacks)
    trainer.fit(model, ckpt_path=ckpt_path)
    return trainer, model


def test_a_request_saves_pauses_and_trains_on_after_the_withdrawal(tmp_path, pod):
    controller = Controller(tmp_path / "podinfo")
    callback = GpuPolicyCallback(guard=guard_for(controller, pod, signals=(signal.SIGTERM,), chain=True))
    steps = []
    controller.step = lambda: steps[-1]

    class Track(L.Callback):
        def on_train_batch_end(self, trainer, *args):
            steps.append(trainer.global_step)

    trainer, model = fit(tmp_path, [Track(), AskAfter(controller), callback])
    assert controller.paused_at == [ASK_AFTER] and model.seen == list(range(MAX_STEPS))
    assert callback.last_path == str(tmp_path / "checkpoints" / "last.ckpt")
    assert torch.load(callback.last_path, weights_only=False)["global_step"] == ASK_AFTER
    ((step, seconds, at),) = pod.notes
    assert step == ASK_AFTER and seconds >= 0 and at == REQUESTED


def test_sigterm_while_paused_ends_with_143_and_resumes_from_last(tmp_path, pod):
    controller = Controller(tmp_path / "podinfo", then="sigterm")
    callback = GpuPolicyCallback(guard=guard_for(controller, pod, signals=(signal.SIGTERM,), chain=True))
    controller.step = lambda: None
    with pytest.raises(SystemExit) as stopped:  # with Lightning's ModelCheckpoint: last.ckpt goes in its folder
        fit(tmp_path, [AskAfter(controller), callback], checkpointing=True)
    assert stopped.value.code == 128 + signal.SIGTERM and callback.preempted
    assert len(pod.notes) == 1 and torch.load(callback.last_path, weights_only=False)["global_step"] == ASK_AFTER
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # Lightning's and the guard's handlers are gone

    assert callback.last_path == str(tmp_path / "checkpoints" / "last.ckpt")
    _, resumed = fit(tmp_path, [], ckpt_path="last", checkpointing=True)  # Lightning finds it as "last"
    assert resumed.seen == list(range(ASK_AFTER, MAX_STEPS))  # none lost, none repeated
