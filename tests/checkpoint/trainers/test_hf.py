"""The Hugging Face callback against the real Trainer on the CPU: a tiny GPT-2 built from a config
(nothing is downloaded) saves through the Trainer's own checkpointing when asked, pauses, and
trains on after the withdrawal, or stops on SIGTERM with exit status 143 and resumes losing no step."""

import signal

import pytest

transformers = pytest.importorskip("transformers", reason="`make test` runs these in .venv-trainers")
torch = pytest.importorskip("torch")

from gpu_policy.checkpoint.hf import GpuPolicyCallback  # noqa: E402
from tests.checkpoint.trainers.conftest import REQUESTED, Controller, guard_for  # noqa: E402

MAX_STEPS, ASK_AT = 6, 2


class Batches(torch.utils.data.Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, 32, (64, 8), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


class AskAt(transformers.TrainerCallback):
    """The controller's request lands (the kubelet rewrote the file) during step `ASK_AT`."""

    def __init__(self, controller):
        self.controller = controller

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == ASK_AT:
            self.controller.ask()


def trainer(tmp_path, callbacks):
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=32, n_positions=8, n_embd=8, n_layer=1, n_head=2)
    args = transformers.TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=MAX_STEPS,
                                          per_device_train_batch_size=4, save_strategy="no", report_to=[],
                                          use_cpu=True, disable_tqdm=True, logging_strategy="no", seed=0)
    return transformers.Trainer(model=transformers.GPT2LMHeadModel(config), args=args, train_dataset=Batches(),
                                callbacks=callbacks)


def checkpoints(tmp_path):
    return sorted(p.name for p in (tmp_path / "out").glob("checkpoint-*"))


def test_a_request_saves_pauses_and_trains_on_after_the_withdrawal(tmp_path, pod):
    controller = Controller(tmp_path / "podinfo")
    callback = GpuPolicyCallback(guard_for(controller, pod))
    run = trainer(tmp_path, [AskAt(controller), callback])
    controller.step = lambda: run.state.global_step
    run.train()
    assert controller.paused_at == [ASK_AT]  # paused at the step it saved, then trained on
    assert run.state.global_step == MAX_STEPS and not callback.preempted
    assert checkpoints(tmp_path) == [f"checkpoint-{ASK_AT}"]  # the Trainer's own checkpoint
    ((step, seconds, at),) = pod.notes
    assert step == ASK_AT and seconds >= 0 and at == REQUESTED  # at or after the request, whatever our clock
    assert callback.guard.requests_answered == 1


def test_sigterm_while_paused_stops_with_143_and_a_resume_loses_no_step(tmp_path, pod):
    controller = Controller(tmp_path / "podinfo", then="sigterm")
    callback = GpuPolicyCallback(guard_for(controller, pod))
    run = trainer(tmp_path, [AskAt(controller), callback])
    controller.step = lambda: run.state.global_step
    with pytest.raises(SystemExit) as stopped:
        run.train()
    assert stopped.value.code == 128 + signal.SIGTERM and callback.preempted
    assert run.state.global_step == ASK_AT and checkpoints(tmp_path) == [f"checkpoint-{ASK_AT}"]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the guard's handlers are gone

    again = trainer(tmp_path, [])
    steps = []
    again.add_callback(type("Count", (transformers.TrainerCallback,), {
        "on_step_begin": lambda self, args, state, control, **kw: steps.append(state.global_step)})())
    again.train(resume_from_checkpoint=True)
    assert steps == list(range(ASK_AT, MAX_STEPS))  # resumed at the step it saved: none lost, none repeated


def test_sigterm_mid_training_saves_once_and_stops(tmp_path, pod):
    controller = Controller(tmp_path / "podinfo")
    guard = guard_for(controller, pod)

    class SigtermAt(transformers.TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 3:
                guard.trigger()

    run = trainer(tmp_path, [SigtermAt(), GpuPolicyCallback(guard, exit_on_signal=False)])
    run.train()
    assert run.state.global_step == 3 and checkpoints(tmp_path) == ["checkpoint-3"] and controller.paused_at == []
    assert [step for step, _, _ in pod.notes] == [3]
