"""The small package functions behind the handout demonstrations in notebooks 02-08."""

import pytest
import torch

from transformer_lab.span import distance_from_span


def test_rows_built_from_the_basis_are_in_its_span():
    torch.manual_seed(0)
    basis = torch.randn(3, 8)
    rows = torch.randn(5, 3) @ basis  # (5, 8): combinations of the basis rows
    assert distance_from_span(rows, basis).max() < 1e-5  # float32 rounding of rows


def test_distance_is_the_length_of_the_orthogonal_part():
    basis = torch.eye(4)[:2]  # span of e_0, e_1
    rows = torch.tensor([[1.0, 2.0, 3.0, 4.0], [0.0, -1.0, 0.0, 0.0]])
    expected = torch.tensor([5.0, 0.0], dtype=torch.float64)  # |(3, 4)| = 5
    assert torch.allclose(distance_from_span(rows, basis), expected, atol=1e-12)


def test_dependent_basis_rows_span_no_more():
    basis = torch.tensor([[1.0, 0.0, 0.0], [2.0, 0.0, 0.0]])  # rank 1
    rows = torch.tensor([[0.0, 1.0, 0.0]])
    assert torch.allclose(distance_from_span(rows, basis), torch.tensor([1.0], dtype=torch.float64))


def test_attention_outputs_stay_in_the_span_of_the_values():
    torch.manual_seed(1)
    v = torch.randn(3, 10)  # 3 values in a 10-wide space
    weights = torch.softmax(torch.randn(6, 3), dim=-1)  # 6 queries
    assert distance_from_span(weights @ v, v).max() < 1e-6
    assert distance_from_span(torch.nn.functional.gelu(weights @ v), v).min() > 1e-3


def test_bad_inputs_name_what_was_expected():
    with pytest.raises(ValueError, match="rows must have 2 dimensions"):
        distance_from_span(torch.zeros(3), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="basis must have last dimension"):
        distance_from_span(torch.zeros(2, 3), torch.zeros(2, 4))
