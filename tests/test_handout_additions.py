"""The small package functions behind the handout demonstrations in notebooks 02-08."""

import pytest
import torch

from transformer_lab.lessons.span import distance_from_span


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


# --- positions beyond the training length (notebook 03) ------------------------------------
from transformer_lab.lessons.extrapolation import (  # noqa: E402
    PreviousTokenModel,
    accuracy_by_position,
    train_previous_token,
)


@pytest.fixture(scope="module")
def previous_token_models():
    return {
        kind: train_previous_token(kind, train_len=8, max_len=32, steps=150)
        for kind in ("sinusoidal", "learned")
    }


def test_both_kinds_learn_the_task_at_the_training_length(previous_token_models):
    for kind, model in previous_token_models.items():
        assert accuracy_by_position(model, 8).min() > 0.95, kind


def test_learned_rows_never_trained_give_chance_accuracy(previous_token_models):
    far = accuracy_by_position(previous_token_models["learned"], 32)[16:]  # positions 17..31
    assert far.mean() < 0.2  # chance is 1/16


def test_sinusoidal_positions_fail_far_beyond_the_training_length(previous_token_models):
    far = accuracy_by_position(previous_token_models["sinusoidal"], 32)[16:]
    assert far.mean() < 0.5


def test_attention_weights_are_causal_and_sum_to_one():
    model = PreviousTokenModel("learned", vocab_size=5, d_model=8, max_len=6)
    logits, weights = model(torch.randint(5, (2, 6)), return_weights=True)
    assert logits.shape == (2, 6, 5) and weights.shape == (2, 6, 6)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 6))
    assert weights.triu(1).abs().max() == 0


def test_previous_token_inputs_are_checked():
    with pytest.raises(ValueError, match="kind must be one of"):
        PreviousTokenModel("rotary", 5, 8, 6)
    with pytest.raises(ValueError, match="max_len=6"):
        PreviousTokenModel("learned", 5, 8, 6)(torch.zeros(1, 7, dtype=torch.long))
    with pytest.raises(ValueError, match="train_len must lie in"):
        train_previous_token("learned", train_len=40, max_len=32)


# --- in-context learning in miniature (notebook 07) ----------------------------------------
from transformer_lab.lessons.induction import (  # noqa: E402
    AttentionOnlyModel,
    induction_score,
    repeat_losses,
    repeated_sequences,
    train_induction,
)


def test_repeated_sequences_repeat_their_first_half():
    ids = repeated_sequences(3, 5, 7, torch.Generator().manual_seed(0))
    assert ids.shape == (3, 10) and ids.max() < 7
    assert torch.equal(ids[:, :5], ids[:, 5:])


def test_attention_only_model_is_causal():
    torch.manual_seed(0)
    model = AttentionOnlyModel(vocab_size=9, d_model=8, max_len=12)
    ids = torch.randint(9, (2, 12))
    changed = ids.clone()
    changed[:, 7] = (changed[:, 7] + 1) % 9
    (logits, maps), (logits_changed, _) = model(ids), model(changed)
    assert torch.allclose(logits[:, :7], logits_changed[:, :7], atol=1e-6)
    assert not torch.allclose(logits[:, 7:], logits_changed[:, 7:])
    assert len(maps) == 2 and maps[0].shape == (2, 12, 12)


def test_induction_score_of_a_perfect_and_of_a_uniform_head():
    L = 4
    perfect = torch.zeros(2 * L, 2 * L)
    for t in range(L, 2 * L):
        perfect[t, t - L + 1] = 1.0
    assert induction_score(perfect, L) == 1.0
    uniform = torch.full((2 * L, 2 * L), 1.0 / (2 * L))
    assert torch.isclose(induction_score(uniform, L), torch.tensor(1.0 / (2 * L)))
    with pytest.raises(ValueError, match="weights must be"):
        induction_score(perfect, 3)


def test_training_makes_the_second_copy_predictable():
    model, history = train_induction(steps=400, seed=0)
    assert len(history) == 400
    first, second = repeat_losses(model, length=10)
    assert first > 3.0  # random tokens stay near chance, ln 32 = 3.47
    assert second < 1.5  # the repeat is read from the context
    _, maps = model(repeated_sequences(32, 10, 32, torch.Generator().manual_seed(3)))
    assert induction_score(maps[-1], 10) > 0.5


# --- read-outs: tagging and the last token (notebook 06) -----------------------------------
from transformer_lab.lessons.readouts import (  # noqa: E402
    ReadoutClassifier,
    TokenTagger,
    last_token_states,
    same_as_previous_batch,
    token_tagging_loss,
)
from transformer_lab.models import BertConfig  # noqa: E402


def test_last_token_states_skip_the_padding():
    hidden = torch.arange(2 * 4 * 3, dtype=torch.float32).view(2, 4, 3)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]], dtype=torch.bool)
    expected = torch.stack([hidden[0, 3], hidden[1, 1]])
    assert torch.equal(last_token_states(hidden, mask), expected)
    assert torch.equal(last_token_states(hidden), hidden[:, -1])
    with pytest.raises(ValueError, match="attention_mask must have shape"):
        last_token_states(hidden, mask[:, :3])
    with pytest.raises(ValueError, match="at least one real token"):
        last_token_states(hidden, torch.zeros(2, 4, dtype=torch.bool))


def test_tagging_loss_equals_torch_with_ignored_padding():
    torch.manual_seed(0)
    logits, tags = torch.randn(2, 5, 3), torch.randint(3, (2, 5))
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    reference = torch.nn.functional.cross_entropy(
        logits.reshape(-1, 3), tags.masked_fill(~mask, -100).reshape(-1), ignore_index=-100
    )
    assert torch.allclose(token_tagging_loss(logits, tags, mask), reference)
    with pytest.raises(ValueError, match="tags and attention_mask must have shape"):
        token_tagging_loss(logits, tags[:, :4], mask)


def test_same_as_previous_tags():
    ids, mask, tags = same_as_previous_batch(64, 10, 4, torch.Generator().manual_seed(0))
    assert ids.shape == mask.shape == tags.shape == (64, 10)
    assert (ids[~mask] == 0).all() and (tags[~mask] == 0).all() and (ids[mask] > 0).all()
    for b in range(4):
        for t in range(1, 10):
            expected = int(bool(mask[b, t]) and ids[b, t].item() == ids[b, t - 1].item())
            assert tags[b, t].item() == expected


def test_readout_models_read_where_they_say():
    torch.manual_seed(0)
    config = BertConfig.tiny(vocab_size=7, max_len=6, n_layers=1, d_model=16, d_ff=32, dropout=0.0)
    ids, mask = torch.randint(1, 7, (2, 6)), torch.tensor([[1] * 6, [1] * 3 + [0] * 3]).bool()
    last = ReadoutClassifier(config, read="last").eval()
    hidden = last.bert(ids, mask).last_hidden_state
    assert torch.allclose(last(ids, mask), last.classifier(hidden[[0, 1], [5, 2]]), atol=1e-6)
    cls = ReadoutClassifier(config, read="cls").eval()
    assert torch.allclose(
        cls(ids, mask), cls.classifier(cls.bert(ids, mask).last_hidden_state[:, 0]), atol=1e-6
    )
    assert TokenTagger(config, n_tags=3)(ids, mask).shape == (2, 6, 3)
    with pytest.raises(ValueError, match="read must be one of"):
        ReadoutClassifier(config, read="mean")


# --- batching by length (notebook 05) ------------------------------------------------------
from transformer_lab.lessons.length_batching import (  # noqa: E402
    batches_by_length,
    padding_tokens,
    random_batches,
)


def test_padding_tokens_by_hand():
    lengths = [1, 5, 2, 2]
    assert padding_tokens(lengths, [torch.tensor([0, 1]), torch.tensor([2, 3])]) == 4 + 0
    assert padding_tokens(lengths, [torch.tensor([0, 2, 3]), torch.tensor([1])]) == 1


def test_batches_cover_every_index_once():
    g = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, 20, (103,), generator=g)
    for batches in (batches_by_length(lengths, 10, g), random_batches(103, 10, g)):
        assert sorted(torch.cat(batches).tolist()) == list(range(103))
        assert max(len(b) for b in batches) == 10


def test_sorting_by_length_needs_the_least_padding():
    g = torch.Generator().manual_seed(1)
    lengths = torch.randint(1, 30, (500,), generator=g)
    sorted_pad = padding_tokens(lengths, batches_by_length(lengths, 16, g))
    random_pad = padding_tokens(lengths, random_batches(500, 16, g))
    assert sorted_pad < random_pad / 3
    # sorted batches are contiguous runs of the sorted lengths: padding is within each run
    brute = sum(
        int(run.max()) * len(run) - int(run.sum()) for run in torch.sort(lengths).values.split(16)
    )
    assert sorted_pad == brute


def test_length_batching_inputs_are_checked():
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        batches_by_length([1, 2], 0)
    with pytest.raises(ValueError, match="lengths must be a 1-D sequence"):
        batches_by_length([[1, 2]], 2)
