"""The GPU path, checked against the CPU: ``make gpu-check`` on a machine with an NVIDIA GPU.

Each check prints one line, ``PASS``, ``FAIL`` or ``SKIP`` with its reason, and a summary follows;
the exit status is 1 if any check failed. Without CUDA every check is skipped and the status is 0.

    python benchmarks/gpu_check.py [--skip-notebook] [--skip-torchrun]

Tolerances. Float32 throughout, TF32 off (``torch.backends.cuda.matmul.allow_tf32`` and cuDNN's),
so the GPU computes the same products as the CPU up to summation order. A tensor passes when
``max |gpu - cpu| <= RTOL * max(1, max |cpu|)``: RTOL = 1e-4 for forward outputs, losses and
parameter gradients, 1e-3 for the losses of a few training steps (AdamW divides by the square
root of small second moments, which amplifies rounding). Generated tokens and the notebook's
success are compared exactly. It takes about a minute on one H200 (most of it the notebook).
"""

from __future__ import annotations

import argparse
import copy
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run from anywhere without installing the package
    sys.path.insert(0, str(REPO))

RTOL = 1e-4  # forward outputs, losses and gradients, relative to the tensor's largest magnitude
TRAIN_RTOL = 1e-3  # losses of a few AdamW steps
DEVICE = "cuda"  # what every check compares with the CPU (a test may point it elsewhere)
NOTEBOOK = REPO / "solutions" / "02_multi_head_attention" / "02_multi_head_attention.ipynb"


class Report:
    """Collects one line per check: PASS / FAIL / SKIP with a detail."""

    def __init__(self) -> None:
        self.counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}

    def line(self, word: str, name: str, detail: str) -> None:
        self.counts[word] += 1
        print(f"{word}  {name}: {detail}", flush=True)

    def run(self, name: str, check: Callable[[], tuple[bool, str]]) -> None:
        """Run ``check() -> (ok, detail)``; an exception is a FAIL that names it."""
        start = time.perf_counter()
        try:
            ok, detail = check()
        except Exception as exc:  # a check that crashes fails, the others still run
            ok, detail = (
                False,
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
            )
        self.line("PASS" if ok else "FAIL", name, f"{detail} ({time.perf_counter() - start:.1f} s)")

    def summary(self) -> int:
        c = self.counts
        print(f"summary: {c['PASS']} passed, {c['FAIL']} failed, {c['SKIP']} skipped")
        return 1 if c["FAIL"] else 0


def rel_diff(gpu: torch.Tensor, cpu: torch.Tensor) -> float:
    """max |gpu - cpu| / max(1, max |cpu|)."""
    gpu = gpu.detach().float().cpu()
    cpu = cpu.detach().float()
    if gpu.shape != cpu.shape:
        raise ValueError(
            f"shapes differ: {tuple(gpu.shape)} on the GPU, {tuple(cpu.shape)} on the CPU"
        )
    scale = max(1.0, cpu.abs().max().item()) if cpu.numel() else 1.0
    return (gpu - cpu).abs().max().item() / scale if cpu.numel() else 0.0


def forward_backward(model: torch.nn.Module, inputs: tuple, loss_of: Callable) -> tuple[dict, dict]:
    """One forward and backward pass: (named outputs, named parameter gradients)."""
    model.zero_grad(set_to_none=True)
    outputs = loss_of(model, *inputs)  # {"logits": ..., "loss": ...}
    outputs["loss"].backward()
    grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
    return outputs, grads


def same_on_both(model: torch.nn.Module, inputs: tuple, loss_of: Callable) -> tuple[bool, str]:
    """The model's outputs and gradients on CUDA against the CPU, within RTOL."""
    model = model.train(False)
    gpu_model = copy.deepcopy(model).to(DEVICE)
    cpu_out, cpu_grads = forward_backward(model, inputs, loss_of)
    gpu_inputs = tuple(x.to(DEVICE) if isinstance(x, torch.Tensor) else x for x in inputs)
    gpu_out, gpu_grads = forward_backward(gpu_model, gpu_inputs, loss_of)
    worst_out = max(rel_diff(gpu_out[k], cpu_out[k]) for k in cpu_out)
    if set(gpu_grads) != set(cpu_grads):
        return False, "different parameters received gradients on the GPU and the CPU"
    worst_grad, where = max((rel_diff(gpu_grads[n], g), n) for n, g in cpu_grads.items())
    ok = worst_out <= RTOL and worst_grad <= RTOL
    return ok, (
        f"outputs {worst_out:.1e}, gradients {worst_grad:.1e} (worst: {where}), "
        f"{len(cpu_grads)} parameters, tolerance {RTOL:.0e}"
    )


def model_checks() -> list[tuple[str, Callable[[], tuple[bool, str]]]]:
    """Forward and backward of every model, CUDA against the CPU."""
    from transformer_lab.models import (
        BERT,
        GPT,
        BertConfig,
        GPTConfig,
        Seq2SeqConfig,
        Seq2SeqTransformer,
        ViT,
        ViTConfig,
    )

    def gpt():
        torch.manual_seed(0)
        c = GPTConfig.tiny(max_len=32)
        idx = torch.randint(0, c.vocab_size, (4, 32))
        targets = torch.randint(0, c.vocab_size, (4, 32))
        loss_of = lambda m, x, y: (lambda o: {"logits": o.logits, "loss": o.loss})(m(x, y))  # noqa: E731
        return same_on_both(GPT(c), (idx, targets), loss_of)

    def bert():
        torch.manual_seed(0)
        c = BertConfig.tiny()
        ids = torch.randint(1, c.vocab_size, (4, 24))
        mask = torch.ones(4, 24, dtype=torch.long)
        mask[1, 18:] = 0  # one padded row

        def loss_of(m, x, a):
            o = m(x, attention_mask=a)
            h = o.last_hidden_state
            return {
                "hidden": h,
                "pooled": o.pooler_output,
                "loss": h.pow(2).mean() + o.pooler_output.sum(),
            }

        return same_on_both(BERT(c), (ids, mask), loss_of)

    def vit():
        torch.manual_seed(0)
        c = ViTConfig.tiny()
        size = c.image_size if isinstance(c.image_size, tuple) else (c.image_size, c.image_size)
        pixels = torch.randn(4, c.n_channels, *size)
        labels = torch.randint(0, c.n_classes, (4,))
        loss_of = lambda m, x, y: (lambda o: {"logits": o.logits, "loss": o.loss})(m(x, y))  # noqa: E731
        return same_on_both(ViT(c), (pixels, labels), loss_of)

    def seq2seq():
        torch.manual_seed(0)
        c = Seq2SeqConfig.tiny()
        src = torch.randint(1, c.src_vocab_size, (4, 12))
        src[2, 9:] = c.pad_id  # a padded source
        tgt = torch.randint(1, c.tgt_vocab_size, (4, 10))
        targets = torch.randint(1, c.tgt_vocab_size, (4, 10))
        loss_of = lambda m, s, t, y: (lambda o: {"logits": o.logits, "loss": o.loss})(m(s, t, y))  # noqa: E731
        return same_on_both(Seq2SeqTransformer(c), (src, tgt, targets), loss_of)

    return [("GPT forward+backward", gpt), ("BERT forward+backward", bert),
            ("ViT forward+backward", vit), ("Seq2Seq forward+backward", seq2seq)]  # fmt: skip


def check_train() -> tuple[bool, str]:
    """``train()`` for a few steps on CUDA and on the CPU: the same losses within TRAIN_RTOL."""
    from transformer_lab.data import shakespeare
    from transformer_lab.models import GPT, GPTConfig
    from transformer_lab.train import train

    data = shakespeare()
    losses = {}
    for device in ("cpu", DEVICE):
        torch.manual_seed(0)
        model = GPT(GPTConfig.tiny(max_len=32, vocab_size=data.vocab_size))
        gen = torch.Generator().manual_seed(1)
        history = train(
            model, lambda g=gen: data.get_batch("train", 32, 8, generator=g),
            steps=8, lr=3e-3, warmup_steps=2, log_every=1, progress=False, device=device,
        )  # fmt: skip
        on = next(model.parameters()).device.type
        if on != device:
            return False, f"train(device={device!r}) left the model on {on}"
        losses[device] = torch.tensor(history.train_loss)
    worst = rel_diff(losses[DEVICE], losses["cpu"])
    return worst <= TRAIN_RTOL, (
        f"8 steps, loss {losses['cpu'][0]:.4f} -> {losses['cpu'][-1]:.4f} on the CPU, "
        f"largest difference {worst:.1e} (tolerance {TRAIN_RTOL:.0e})"
    )


def check_generation() -> tuple[bool, str]:
    """Greedy generation with the KV cache: the same tokens on CUDA as on the CPU, and as
    without the cache on CUDA."""
    from transformer_lab.models import GPT, GPTConfig

    torch.manual_seed(0)
    model = GPT(GPTConfig.tiny(max_len=128)).eval()
    with torch.no_grad():
        model.tok_emb.weight.normal_(0.0, 1.0)  # peaked logits: greedy choices are not near-ties
    prompt = torch.randint(0, 65, (2, 16))
    cpu = model.generate(prompt, 96, temperature=0.0, progress=False)
    gpu_model = copy.deepcopy(model).to(DEVICE)
    gpu = gpu_model.generate(prompt.to(DEVICE), 96, temperature=0.0, progress=False).cpu()
    gpu_nocache = gpu_model.generate(
        prompt.to(DEVICE), 96, temperature=0.0, use_cache=False, progress=False
    )
    same = torch.equal(gpu, cpu) and torch.equal(gpu_nocache.cpu(), cpu)
    differ = (gpu != cpu).sum().item()
    cache_same = torch.equal(gpu_nocache.cpu(), gpu)
    return (
        same,
        f"2 x 96 greedy tokens, {differ} differ from the CPU's, cache = no cache: {cache_same}",
    )


def check_tiled() -> tuple[bool, str]:
    """Tiled attention on CUDA against the CPU (causal and with a padding mask)."""
    from transformer_lab.tiled import tiled_attention

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 300, 32) for _ in range(3))
    mask = torch.ones(2, 1, 1, 300, dtype=torch.bool)
    mask[1, ..., 250:] = False
    worst = 0.0
    for kwargs in ({"is_causal": True}, {"mask": mask}):
        cpu = tiled_attention(q, k, v, block_size=64, **kwargs)
        gkw = {n: (x.to(DEVICE) if isinstance(x, torch.Tensor) else x) for n, x in kwargs.items()}
        gpu = tiled_attention(q.to(DEVICE), k.to(DEVICE), v.to(DEVICE), block_size=64, **gkw)
        worst = max(worst, rel_diff(gpu, cpu))
    return (
        worst <= RTOL,
        f"causal and padded, T = S = 300, blocks of 64: {worst:.1e} (tolerance {RTOL:.0e})",
    )


def check_notebook() -> tuple[bool, str]:
    """One solution notebook executed headless in a kernel that sees the GPU."""
    import nbformat
    from nbclient import NotebookClient

    env = {k: v for k, v in os.environ.items() if k not in ("NBGRADER_EXECUTION", "TLAB_GRADING")}
    env["MPLBACKEND"] = "Agg"  # as tests/executed_notebooks.py runs a student's kernel
    env["PYTHONPATH"] = str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(
        "import torch; print('cuda visible:', torch.cuda.is_available())"))  # fmt: skip
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(NOTEBOOK.parent)}})  # fmt: skip
    client.execute(env=env)  # raises CellExecutionError on the first failing cell
    seen = "".join(o.get("text", "") for o in nb.cells[0].get("outputs", []))
    visible = "cuda visible: True" in seen
    return (
        visible,
        f"{NOTEBOOK.relative_to(REPO)}: every cell ran, kernel {seen.strip() or 'printed nothing'}",
    )


def check_torchrun(n_gpus: int) -> tuple[bool, str]:
    """``torchrun`` with NCCL on every GPU (tests/ddp_train_script.py's tiny GPT, 4 steps)."""
    script = REPO / "tests" / "ddp_train_script.py"
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "ddp.pt"
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc_per_node={n_gpus}", str(script), str(out), "--steps", "4"]  # fmt: skip
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return False, f"torchrun exited with {done.returncode}: {' | '.join(tail)}"
        result = torch.load(out, weights_only=True)
        losses = result["loss"]
        ok = len(losses) == 4 and bool(torch.isfinite(torch.tensor(losses)).all())
        return ok, (
            f"{n_gpus} process(es), one per GPU, NCCL (train() picks it when CUDA is available), "
            f"losses {losses[0]:.4f} -> {losses[-1]:.4f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-notebook", action="store_true", help="leave out the notebook run")
    parser.add_argument("--skip-torchrun", action="store_true", help="leave out torchrun/NCCL")
    args = parser.parse_args(argv)
    report = Report()
    names = [n for n, _ in model_checks()] + [
        "train() on CUDA", "KV-cache generation", "tiled attention", "notebook with CUDA visible",
        "torchrun with NCCL"]  # fmt: skip
    if not torch.cuda.is_available():
        why = "CUDA is not available" + (
            f" (torch {torch.__version__} is a CPU build)" if torch.version.cuda is None else ""
        )
        print(f"torch {torch.__version__}: no GPU, every check skipped")
        for name in names:
            report.line("SKIP", name, why)
        return report.summary()
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 products, as on the CPU
    torch.backends.cudnn.allow_tf32 = False
    n_gpus = torch.cuda.device_count()
    print(
        f"torch {torch.__version__} (CUDA {torch.version.cuda}), {n_gpus} GPU(s): "
        f"{torch.cuda.get_device_name(0)}; float32, TF32 off; tolerance {RTOL:.0e} relative"
    )
    for name, check in model_checks():
        report.run(name, check)
    report.run("train() on CUDA", check_train)
    report.run("KV-cache generation", check_generation)
    report.run("tiled attention", check_tiled)
    if args.skip_notebook:
        report.line("SKIP", "notebook with CUDA visible", "--skip-notebook")
    else:
        try:
            import ipykernel  # noqa: F401
            import nbclient  # noqa: F401
        except ImportError as exc:
            report.line(
                "SKIP",
                "notebook with CUDA visible",
                f"{exc.name} is not installed (make install-dev)",
            )
        else:
            report.run("notebook with CUDA visible", check_notebook)
    if args.skip_torchrun:
        report.line("SKIP", "torchrun with NCCL", "--skip-torchrun")
    elif not torch.distributed.is_available() or not torch.distributed.is_nccl_available():
        report.line("SKIP", "torchrun with NCCL", "this torch build has no NCCL")
    else:
        report.run("torchrun with NCCL", lambda: check_torchrun(n_gpus))
    return report.summary()


if __name__ == "__main__":
    sys.exit(main())
