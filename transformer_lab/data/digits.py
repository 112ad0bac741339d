"""Handwritten digits: the image dataset for the ViT notebook.

scikit-learn ships the UCI "Optical Recognition of Handwritten Digits" test set
(``sklearn.datasets.load_digits``): 1,797 grayscale images of 8x8 pixels with values 0..16,
ten classes. It is bundled with scikit-learn, so nothing is downloaded. Small enough to train a
ViT with 2x2 or 4x4 patches on a CPU in a minute, large enough that the test accuracy means
something.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch
from torch import Tensor

from transformer_lab.data.batching import iterate_batches, sample_batch

__all__ = ["DigitsData", "load_digits_data", "DIGITS_CLASSES"]

DIGITS_CLASSES = tuple(str(d) for d in range(10))
_MAX_PIXEL = 16.0  # load_digits stores 4x4-block counts of set pixels: 0..16


@dataclass(frozen=True)
class DigitsData:
    """A seeded, stratified train/test split of the digits.

    Attributes:
        x_train: (N_train, 1, 8, 8) float, in [0, 1] (or standardised if ``normalize``).
        y_train: (N_train,) long class ids 0..9.
        x_test, y_test: the same for the test images.
        mean, std: the training pixels' mean and standard deviation (one number each, computed
            on the [0, 1] images); ``normalize=True`` subtracted and divided by them.
        normalized: whether the images were standardised.
        train_index, test_index: rows of ``sklearn.datasets.load_digits()`` in each split.
    """

    x_train: Tensor
    y_train: Tensor
    x_test: Tensor
    y_test: Tensor
    mean: float
    std: float
    normalized: bool
    train_index: Tensor
    test_index: Tensor

    n_classes = 10
    image_size = 8
    in_channels = 1

    def get_batch(
        self,
        split: str = "train",
        batch_size: int = 64,
        generator: torch.Generator | None = None,
        device: torch.device | str | None = None,
    ) -> tuple[Tensor, Tensor]:
        """A random batch (images (B, 1, 8, 8), labels (B,)) from ``"train"`` or ``"test"``."""
        x, y = self._split(split)
        return sample_batch(x, y, batch_size=batch_size, generator=generator, device=device)

    def batches(self, split: str = "test", batch_size: int = 256):
        """One ordered pass over a split in mini-batches (for evaluation)."""
        x, y = self._split(split)
        return iterate_batches(x, y, batch_size=batch_size)

    def unnormalize(self, images: Tensor) -> Tensor:
        """Undo ``normalize`` so images can be shown in [0, 1]."""
        return images * self.std + self.mean if self.normalized else images

    def _split(self, split: str) -> tuple[Tensor, Tensor]:
        if split not in ("train", "test"):
            raise ValueError(f"split must be 'train' or 'test', but received {split!r}.")
        return (self.x_train, self.y_train) if split == "train" else (self.x_test, self.y_test)

    def __repr__(self) -> str:
        return (
            f"DigitsData(train={len(self.y_train)}, test={len(self.y_test)}, "
            f"image=(1, 8, 8), classes=10, normalized={self.normalized})"
        )


@lru_cache(maxsize=1)
def _raw_digits():
    from sklearn.datasets import load_digits  # imported lazily: sklearn takes ~1 s to import

    bunch = load_digits()
    return bunch.images, bunch.target


def load_digits_data(
    test_fraction: float = 0.2, seed: int = 0, normalize: bool = False
) -> DigitsData:
    """Load scikit-learn's 8x8 digits as tensors with a fixed, stratified train/test split.

    Args:
        test_fraction: share of the images held out for testing (stratified: every class keeps
            the same share).
        seed: the split's random seed; the same seed always gives the same split.
        normalize: standardise pixels with the training set's mean and std (else scale to [0, 1]).
    Returns:
        a :class:`DigitsData`.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(
            f"test_fraction must lie strictly between 0 and 1, but received {test_fraction}."
        )
    from sklearn.model_selection import train_test_split

    images, target = _raw_digits()
    index = torch.arange(len(target)).numpy()
    train_idx, test_idx = train_test_split(
        index, test_size=test_fraction, random_state=seed, stratify=target, shuffle=True
    )
    x = torch.as_tensor(images, dtype=torch.float32).unsqueeze(1) / _MAX_PIXEL  # (N, 1, 8, 8)
    y = torch.as_tensor(target, dtype=torch.long)  # (N,)
    train_idx, test_idx = torch.as_tensor(train_idx), torch.as_tensor(test_idx)
    x_train, x_test = x[train_idx], x[test_idx]
    mean, std = x_train.mean().item(), x_train.std().item()
    if normalize:
        x_train, x_test = (x_train - mean) / std, (x_test - mean) / std
    return DigitsData(
        x_train, y[train_idx], x_test, y[test_idx], mean, std, normalize, train_idx, test_idx
    )
