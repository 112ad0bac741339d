"""The training loop: schedule, optimizer groups, seeding, evaluation, grading mode, checkpoints.

Models here are tiny stand-ins (a bigram table, an MLP), so these tests do not depend on
transformer_lab.models.
"""

import dataclasses
import math
from dataclasses import dataclass

import matplotlib
import pytest
import torch
import torch.nn.functional as F
from torch import nn

matplotlib.use("Agg")

from transformer_lab.data import get_batch, shakespeare  # noqa: E402
from transformer_lab.train import (  # noqa: E402
    GRADING_MAX_EVAL_ITERS,
    GRADING_MAX_STEPS,
    History,
    TrainConfig,
    accuracy,
    estimate_loss,
    load_checkpoint,
    lr_at,
    make_optimizer,
    model_loss,
    pick_device,
    save_checkpoint,
    seed_everything,
    train,
)


@pytest.fixture(autouse=True)
def not_grading(monkeypatch):
    """Tests control grading mode themselves, whatever the environment running them says."""
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.delenv("TLAB_GRADING", raising=False)


class Bigram(nn.Module):
    """Next-character logits from the current character alone (a V x V table)."""

    def __init__(self, V: int = 65) -> None:
        super().__init__()
        self.table = nn.Embedding(V, V)

    def forward(self, idx):
        return self.table(idx)  # (B, T, V)


def make_mlp(seed: int = 0, dropout: float = 0.0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(2, 32), nn.LayerNorm(32), nn.ReLU(), nn.Dropout(dropout), nn.Linear(32, 2)
    )


def blobs(n: int = 256, seed: int = 0):
    """Two Gaussian blobs in 2-D, labels 0/1."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(2, (n,), generator=g)
    x = torch.randn(n, 2, generator=g) + (2 * y[:, None] - 1) * 2.0
    return x, y


def fixed_batches(n_steps: int, seed: int = 0, batch_size: int = 32):
    x, y = blobs(1024, seed)
    g = torch.Generator().manual_seed(seed)
    return [
        tuple(t[idx] for t in (x, y))
        for idx in (torch.randint(1024, (batch_size,), generator=g) for _ in range(n_steps))
    ]


# ----------------------------------------------------------------------------- schedule


def torch_schedule(lr, total, warmup, min_lr):
    """The same schedule built from PyTorch's own schedulers: LinearLR then CosineAnnealingLR."""
    opt = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=lr)
    warm = torch.optim.lr_scheduler.LinearLR(
        opt, start_factor=1 / warmup, end_factor=1.0, total_iters=warmup - 1
    )
    cos = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total - warmup, eta_min=min_lr)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[warmup])
    out = []
    for _ in range(total + 1):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def test_lr_schedule_matches_pytorch_schedulers():
    lr, total, warmup, min_lr = 3e-3, 200, 20, 3e-4
    ours = [lr_at(s, lr, total, warmup, min_lr) for s in range(total + 1)]
    ref = torch_schedule(lr, total, warmup, min_lr)
    assert ours == pytest.approx(ref, rel=1e-9, abs=1e-12)


def test_lr_schedule_shape():
    lr, total, warmup = 1e-3, 100, 10
    lrs = [lr_at(s, lr, total, warmup) for s in range(total + 1)]
    assert all(a < b for a, b in zip(lrs[:warmup], lrs[1:warmup]))  # rising warm-up
    assert lrs[0] == pytest.approx(lr / warmup) and lrs[warmup - 1] == pytest.approx(lr)
    assert lrs[warmup] == pytest.approx(lr)  # decay starts from the peak
    assert all(a >= b for a, b in zip(lrs[warmup:], lrs[warmup + 1 :]))  # then never rises
    assert lrs[total] == pytest.approx(lr / 10)  # default floor lr / 10
    assert lr_at(55, lr, total, warmup, min_lr=0.0) == pytest.approx(lr / 2)  # cosine midpoint
    assert lr_at(55, lr, total, warmup, min_lr=0.0, schedule="linear") == pytest.approx(lr / 2)
    assert lr_at(90, lr, total, warmup, schedule="constant") == lr
    assert lr_at(0, lr, total, 0) == lr  # no warm-up
    assert lr_at(500, lr, total, warmup) == pytest.approx(lr / 10)  # past the end: the floor


def test_lr_schedule_errors():
    with pytest.raises(ValueError, match="schedule must be one of"):
        lr_at(0, 1e-3, 10, schedule="step")
    with pytest.raises(ValueError, match="warmup_steps <= total_steps.*warmup_steps=20"):
        lr_at(0, 1e-3, 10, warmup_steps=20)


# ----------------------------------------------------------------------------- optimizer


def test_no_weight_decay_on_biases_and_norm_gains():
    model = nn.Sequential(nn.Embedding(10, 8), nn.LayerNorm(8), nn.Linear(8, 4))
    opt = make_optimizer(model, lr=1e-3, weight_decay=0.1)
    decay = {id(p) for g in opt.param_groups if g["weight_decay"] > 0 for p in g["params"]}
    no_decay = {id(p) for g in opt.param_groups if g["weight_decay"] == 0 for p in g["params"]}
    assert decay == {id(model[0].weight), id(model[2].weight)}
    assert no_decay == {id(model[1].weight), id(model[1].bias), id(model[2].bias)}
    assert isinstance(opt, torch.optim.AdamW)


def test_train_equals_a_plain_pytorch_loop():
    """Same seed, same batches: our loop and a hand-written PyTorch loop reach the same weights."""
    steps, lr, warmup, min_lr, clip, wd = 30, 1e-2, 5, 1e-3, 0.5, 0.1
    batches = fixed_batches(steps)

    ours = make_mlp()
    it = iter(batches)
    train(
        ours,
        lambda: next(it),
        steps=steps,
        lr=lr,
        warmup_steps=warmup,
        min_lr=min_lr,
        grad_clip=clip,
        weight_decay=wd,
        progress=False,
    )

    ref = make_mlp()
    decay = [p for p in ref.parameters() if p.dim() >= 2]
    other = [p for p in ref.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": wd}, {"params": other, "weight_decay": 0.0}],
        lr=lr,
        betas=(0.9, 0.99),
    )
    warm = torch.optim.lr_scheduler.LinearLR(opt, 1 / warmup, 1.0, total_iters=warmup - 1)
    cos = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps - warmup, eta_min=min_lr)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[warmup])
    for x, y in batches:
        loss = F.cross_entropy(ref(x), y)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ref.parameters(), clip)
        opt.step()
        sched.step()

    for (name, p), q in zip(ours.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6, msg=f"parameter {name} differs")


# ----------------------------------------------------------------------------- training runs


def test_loss_falls_on_a_toy_classification():
    model = make_mlp()
    x, y = blobs()
    history = train(
        model,
        fixed_batches(150),
        steps=150,
        lr=1e-2,
        progress=False,
        eval_batches=[(x, y)],
        eval_iters=None,
    )
    assert history.eval_loss[-1] < 0.25 * history.eval_loss[0]
    assert accuracy(model, [(x, y)]) > 0.95
    assert not model.training  # left in eval mode, ready to use


def test_loss_falls_on_shakespeare_bigrams():
    data = shakespeare()
    model = Bigram(data.vocab_size)
    history = train(
        model,
        lambda: data.get_batch("train", 32, 16),
        steps=150,
        lr=3e-2,
        eval_batches=lambda: data.get_batch("val", 32, 16),
        eval_iters=5,
        progress=False,
        seed=0,
    )
    assert history.eval_loss[0] > 4.0  # about log(65) = 4.17 at random initialisation
    assert history.eval_loss[-1] < 3.0
    assert history.train_loss[-1] < history.train_loss[0]


def test_same_seed_same_losses():
    data = shakespeare()

    def run(seed):
        torch.manual_seed(0)
        model = nn.Sequential(
            Bigram(data.vocab_size), nn.Dropout(0.3)
        )  # dropout draws random numbers too
        return train(
            model,
            lambda: get_batch(data.train, 16, 8),
            steps=30,
            lr=1e-2,
            seed=seed,
            progress=False,
        )

    a, b, c = run(1), run(1), run(2)
    assert a.train_loss == b.train_loss
    assert a.train_loss != c.train_loss


def test_seed_everything_seeds_python_numpy_and_torch():
    import random

    import numpy as np

    seed_everything(7)
    first = (random.random(), np.random.rand(), torch.rand(1).item())
    seed_everything(7)
    assert (random.random(), np.random.rand(), torch.rand(1).item()) == first
    with pytest.raises(ValueError, match="non-negative integer"):
        seed_everything(-1)


def test_history_records_and_evaluation_schedule():
    model = make_mlp()
    x, y = blobs(64)
    history = train(
        model,
        fixed_batches(40),
        steps=40,
        eval_every=10,
        log_every=5,
        eval_batches=[(x, y)],
        progress=False,
    )
    assert history.step == list(range(5, 41, 5))
    assert len(history.train_loss) == len(history.lr) == 8
    assert history.eval_step == [0, 10, 20, 30, 40]  # before training, every 10, at the end
    assert len(history.eval_loss) == 5 and history.steps == 40
    assert history.lr[-1] == pytest.approx(lr_at(39, 1e-3, 40, 4))
    assert "steps=40" in repr(history)
    assert history.eval_loss[0] == pytest.approx(F.cross_entropy(make_mlp()(x), y).item(), rel=1e-6)


def test_eval_fn_runs_in_eval_mode_and_training_in_train_mode():
    model = make_mlp(dropout=0.5)
    seen = {"train": set(), "eval": set()}

    def loss_fn(m, batch):
        seen["train"].add(m.training)
        x, y = batch
        return F.cross_entropy(m(x), y)

    def eval_fn(m):
        seen["eval"].add((m.training, torch.is_grad_enabled()))
        return {"loss": 1.0, "accuracy": 0.5}

    history = train(
        model, fixed_batches(12), loss_fn, steps=12, eval_fn=eval_fn, eval_every=4, progress=False
    )
    assert seen == {"train": {True}, "eval": {(False, False)}}
    assert history.eval == {"loss": [1.0] * 4, "accuracy": [0.5] * 4}


def test_iterables_are_cycled_and_generators_fail_clearly():
    x, y = blobs(64)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16)
    history = train(make_mlp(), loader, steps=10, progress=False)  # 4 batches per epoch
    assert history.steps == 10

    def gen():
        yield x[:8], y[:8]

    with pytest.raises(RuntimeError, match="generator can be read only once"):
        train(make_mlp(), gen(), steps=3, progress=False)


def test_model_loss_uses_the_models_own_loss():
    @dataclass
    class Output:
        logits: torch.Tensor
        loss: torch.Tensor | None = None

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.bigram = Bigram(10)

        def forward(self, idx, targets=None):
            logits = self.bigram(idx)
            loss = (
                None
                if targets is None
                else F.cross_entropy(logits.reshape(-1, 10), targets.reshape(-1))
            )
            return Output(logits, loss)

    data = torch.arange(200) % 10
    torch.manual_seed(0)
    lm = LM()
    batches = lambda: get_batch(data, 8, 4)  # noqa: E731
    history = train(lm, batches, model_loss, steps=60, lr=5e-2, progress=False, seed=0)
    assert history.final_train_loss < 1.0  # the sequence is fully predictable
    # The default loss reads .logits from the same output object.
    assert estimate_loss(lm, batches, iters=3) == pytest.approx(
        estimate_loss(lm, batches, model_loss, iters=3), rel=0.5
    )
    with pytest.raises(TypeError, match="loss=None"):
        model_loss(lm, (data[None, :8],))


def test_progress_bar_shows_the_loss(capsys):
    train(make_mlp(), fixed_batches(20), steps=20, log_every=5, progress=True)
    err = capsys.readouterr().err
    assert "training" in err and "loss=" in err and "20/20" in err


# ----------------------------------------------------------------------------- grading mode


@pytest.mark.parametrize("env", [("TLAB_GRADING", "1"), ("NBGRADER_EXECUTION", "autograde")])
def test_grading_mode_caps_steps_and_eval(monkeypatch, capsys, env):
    monkeypatch.setenv(*env)
    calls = {"train": 0, "eval": 0}
    x, y = blobs(32)

    def batches():
        calls["train"] += 1
        return x, y

    def eval_batches():
        calls["eval"] += 1
        return x, y

    history = train(
        make_mlp(), batches, steps=5000, eval_batches=eval_batches, eval_iters=50, eval_every=10
    )
    assert history.steps == GRADING_MAX_STEPS and history.capped
    assert calls["train"] == GRADING_MAX_STEPS
    n_evals = len(history.eval_step)
    assert history.eval_step == [0, 10, 20] and calls["eval"] == n_evals * GRADING_MAX_EVAL_ITERS
    captured = capsys.readouterr()
    assert "capped at 20 steps" in captured.err and "it/s" not in captured.err  # no bar
    short = train(make_mlp(), batches, steps=5, progress=False)
    assert short.steps == 5 and not short.capped
    # The default evaluation interval follows the requested length: only the ends here.
    default = train(make_mlp(), batches, steps=2000, eval_batches=eval_batches)
    assert default.eval_step == [0, GRADING_MAX_STEPS]


# ----------------------------------------------------------------------------- errors


def test_train_errors():
    model = make_mlp()
    batches = fixed_batches(2)
    with pytest.raises(ValueError, match="steps must be a positive integer.*0"):
        train(model, batches, steps=0)
    with pytest.raises(ValueError, match="lr must be positive"):
        train(model, batches, lr=0.0)
    with pytest.raises(TypeError, match="nn.Module"):
        train(lambda x: x, batches)
    with pytest.raises(TypeError, match="function returning one batch.*int"):
        train(model, 5, steps=1)
    with pytest.raises(
        TypeError, match=r"default loss_fn expects batches of \(inputs, targets\).*length 3"
    ):
        train(model, lambda: (batches[0][0], batches[0][1], None), steps=1, progress=False)
    with pytest.raises(ValueError, match="eval_every must be an integer >= 1"):
        train(model, batches, steps=2, eval_every=0, progress=False)
    with pytest.raises(TypeError, match="eval_fn must return a number"):
        train(model, batches, steps=2, eval_fn=lambda m: "good", progress=False)
    with pytest.raises(ValueError, match="trainable parameters, but received none"):
        make_optimizer(nn.ReLU())


def test_a_train_config_and_keywords_give_the_same_run():
    batches = fixed_batches(6)
    config = TrainConfig(steps=6, lr=3e-3, warmup_steps=2, log_every=1, progress=False)
    a = train(make_mlp(), batches, config=config)
    b = train(make_mlp(), batches, steps=6, lr=3e-3, warmup_steps=2, log_every=1, progress=False)
    c = train(make_mlp(), batches, config=dataclasses.replace(config, lr=1.0), lr=3e-3)
    assert a.train_loss == b.train_loss == c.train_loss and a.lr == b.lr
    with pytest.raises(TypeError, match=r"unknown setting 'learning_rate'.*\(steps, lr,"):
        train(make_mlp(), batches, learning_rate=0.1)
    with pytest.raises(TypeError, match="config must be a TrainConfig, but received dict"):
        train(make_mlp(), batches, config={"steps": 2})
    with pytest.raises(ValueError, match="schedule must be one of"):
        TrainConfig(schedule="step")


def test_diverging_loss_is_reported():
    x, y = blobs(32)
    nan_loss = lambda m, b: m(b[0]).sum() * float("nan")  # noqa: E731
    with pytest.raises(FloatingPointError, match="loss became nan at step 1"):
        train(make_mlp(), [(x, y)], nan_loss, steps=5, progress=False)


# ----------------------------------------------------------------------------- evaluation helpers


def test_estimate_loss_and_accuracy_against_direct_computation():
    model = make_mlp(dropout=0.5)
    model.train()
    x, y = blobs(100)
    batches = [(x[:50], y[:50]), (x[50:], y[50:])]
    with torch.no_grad():
        model.eval()
        ref_loss = (
            F.cross_entropy(model(x[:50]), y[:50]) + F.cross_entropy(model(x[50:]), y[50:])
        ).item() / 2
        ref_acc = (model(x).argmax(-1) == y).float().mean().item()
        model.train()
    assert estimate_loss(model, batches, iters=None) == pytest.approx(ref_loss, rel=1e-6)
    assert accuracy(model, batches) == pytest.approx(ref_acc)
    assert model.training  # mode restored
    with pytest.raises(ValueError, match="pass iters="):
        accuracy(model, lambda: batches[0])
    # A perfect predictor: logits are one-hot labels; -100 targets are skipped.
    labels = torch.tensor([0, 2, 1, -100])
    onehot = F.one_hot(labels.clamp(min=0), 3).float()
    assert accuracy(nn.Identity(), [(onehot, labels)]) == 1.0


# ----------------------------------------------------------------------------- devices and checkpoints


def test_pick_device(monkeypatch):
    assert isinstance(pick_device(), torch.device)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert pick_device() == torch.device("cpu")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert pick_device() == torch.device("mps")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert pick_device() == torch.device("cuda")


def test_train_accepts_a_device():
    history = train(make_mlp(), fixed_batches(3), steps=3, device="cpu", progress=False)
    assert history.steps == 3


@dataclass(frozen=True)
class TinyConfig:
    width: int = 32
    dropout: float = 0.0
    names: tuple = ("a", "b")


def test_checkpoint_round_trip(tmp_path):
    model = make_mlp()
    opt = make_optimizer(model, lr=1e-2)
    train(model, fixed_batches(10), steps=10, optimizer=opt, progress=False)
    path = save_checkpoint(
        tmp_path / "ckpts" / "mlp.pt", model, opt, config=TinyConfig(), step=10, note="hello"
    )
    assert path.is_file() and not (tmp_path / "ckpts" / "mlp.pt.tmp").exists()

    fresh = make_mlp(seed=1)
    fresh_opt = make_optimizer(fresh, lr=1e-2)
    ckpt = load_checkpoint(path, fresh, fresh_opt)
    for p, q in zip(model.parameters(), fresh.parameters()):
        assert torch.equal(p, q)
    assert ckpt["step"] == 10 and ckpt["extra"] == {"note": "hello"}
    assert TinyConfig(**ckpt["config"]) == TinyConfig()
    assert ckpt["config_class"].endswith("TinyConfig")
    for p, q in zip(model.parameters(), fresh.parameters()):
        s, t = opt.state[p], fresh_opt.state[q]
        assert torch.equal(s["exp_avg"], t["exp_avg"]) and torch.equal(
            s["exp_avg_sq"], t["exp_avg_sq"]
        )

    # Continuing from the checkpoint equals continuing the original run.
    more = fixed_batches(5, seed=3)
    train(
        model,
        more,
        steps=5,
        optimizer=opt,
        progress=False,
        warmup_steps=0,
        schedule="constant",
        lr=1e-3,
    )
    train(
        fresh,
        more,
        steps=5,
        optimizer=fresh_opt,
        progress=False,
        warmup_steps=0,
        schedule="constant",
        lr=1e-3,
    )
    for p, q in zip(model.parameters(), fresh.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=0)


def test_checkpoint_uses_model_config_and_reports_problems(tmp_path):
    model = make_mlp()
    model.config = TinyConfig(width=7)
    path = save_checkpoint(tmp_path / "m.pt", model)
    ckpt = load_checkpoint(path)
    assert ckpt["config"]["width"] == 7 and ckpt["optimizer"] is None
    with pytest.raises(ValueError, match="holds no optimizer state"):
        load_checkpoint(path, make_mlp(), make_optimizer(make_mlp()))
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_checkpoint(tmp_path / "missing.pt")
    with pytest.raises(RuntimeError, match="size mismatch"):
        load_checkpoint(
            path,
            nn.Sequential(
                nn.Linear(2, 16), nn.LayerNorm(16), nn.ReLU(), nn.Dropout(), nn.Linear(16, 2)
            ),
        )
    with pytest.raises(TypeError, match="dataclass instance or a dict"):
        save_checkpoint(tmp_path / "x.pt", make_mlp(), config=3)


def test_history_plot():
    history = History(
        step=[1, 2, 3],
        train_loss=[3.0, 2.0, 1.5],
        lr=[1e-3, 1e-3, 5e-4],
        eval_step=[0, 3],
        eval={"loss": [3.5, 1.8]},
        steps=3,
    )
    ax = history.plot(show_lr=True, title="toy")
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == ["train loss", "eval loss"]
    assert list(ax.get_lines()[1].get_ydata()) == [3.5, 1.8]
    assert ax.get_title() == "toy"
    assert math.isclose(history.final_eval_loss, 1.8)
