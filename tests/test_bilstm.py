"""The bidirectional LSTM that UDGN's parser and the compound PCFG's inference network share
(``models/layers/bilstm.py``): one direction at a time over sentences reversed within their lengths gives the
packed sequence's states and gradients, on either route, and ``DEPINDUCE_LSTM_ROUTE`` chooses the route."""

from __future__ import annotations

import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torch.profiler import ProfilerActivity, profile

from depinduce.errors import UsageError
from depinduce.models.layers.bilstm import (LSTM_ROUTE_VARIABLE, BiLSTM, reversal_rows, reverse_within_lengths,
                                            swap_time)
from depinduce.models.layers.kernels import device_route


def packed_states(lstm: torch.nn.LSTM, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """The reference: ``lstm`` over the packed sequence, padded back to ``x``'s width."""
    sequence = pack_padded_sequence(x, lengths.clamp(min=1), batch_first=True, enforce_sorted=False)
    return pad_packed_sequence(lstm(sequence)[0], batch_first=True, total_length=x.size(1))[0]


def test_bilstm_equals_the_packed_sequence_lstm() -> None:
    torch.manual_seed(0)
    lstm = BiLSTM(8, 6, 3, dropout=0.3).eval()
    lengths = torch.tensor([7, 3, 5, 1])
    mask = torch.arange(7)[None] < lengths[:, None]
    x = torch.randn(4, 7, 8)
    assert torch.allclose(lstm(x, mask)[mask], packed_states(lstm.lstm, x, lengths)[mask], atol=1e-6)


def test_bilstm_gradients_equal_the_packed_sequence_lstms() -> None:
    """Training: the per-direction oneDNN LSTMs over sentences reversed within their lengths give the packed
    nn.LSTM's gradients (inputs and every weight), so the row swaps' backward is right."""
    torch.manual_seed(0)
    lstm = BiLSTM(8, 6, 3, dropout=0.0).train()
    lengths = torch.tensor([7, 3, 5, 1])
    mask = torch.arange(7)[None] < lengths[:, None]
    x = torch.randn(4, 7, 8)
    weights = torch.randn(4, 7, 12)
    grads = []
    for run in (lambda inputs: lstm(inputs, mask), lambda inputs: packed_states(lstm.lstm, inputs, lengths)):
        lstm.zero_grad()
        inputs = x.clone().requires_grad_()
        (run(inputs) * weights)[mask].sum().backward()
        grads.append([inputs.grad.clone()] + [p.grad.clone() for p in lstm.parameters()])
    for ours, packed in zip(*grads):
        assert torch.allclose(ours, packed, atol=1e-5)


def test_swap_time_reverses_each_sentence_within_its_length_both_ways() -> None:
    lengths = torch.tensor([4, 2, 1])
    x = torch.arange(3 * 5 * 2, dtype=torch.float64).view(3, 5, 2).requires_grad_()
    rows = reversal_rows(lengths, 5)
    swapped = swap_time(x, rows)
    index = reverse_within_lengths(lengths, 5)
    assert torch.equal(swapped, x.gather(1, index[:, :, None].expand(-1, -1, 2)))
    assert swapped[0, :, 0].tolist() == [6.0, 4.0, 2.0, 0.0, 8.0]  # the padding stays in place
    assert swapped[1, :, 0].tolist() == [12.0, 10.0, 14.0, 16.0, 18.0]
    assert torch.equal(swap_time(swapped, rows), x)  # an involution
    assert torch.autograd.gradcheck(lambda t: swap_time(t, rows), (x,))


@pytest.mark.parametrize("route", ["", "packed", "per-direction"])
def test_udgns_lstm_routes_compute_the_same_states(route: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``DEPINDUCE_LSTM_ROUTE`` (unset: one direction at a time, on every device) chooses how the parser's
    BiLSTM runs; the states at real positions and the gradients are the same."""
    torch.manual_seed(0)
    lstm = BiLSTM(6, 5, 2, dropout=0.0).train()
    x = torch.randn(3, 7, 6)
    mask = torch.arange(7)[None, :] < torch.tensor([7, 4, 1])[:, None]
    reference = packed_states(lstm.lstm, x, mask.sum(dim=-1))
    monkeypatch.setenv(LSTM_ROUTE_VARIABLE, route)
    for switch in (device_route, torch.no_grad):  # the device's route, and the CPU's (without gradients)
        with switch(), profile(activities=[ProfilerActivity.CPU]) as profiler:
            states = lstm(x, mask)
        packed = any(e.name == "aten::_pack_padded_sequence" for e in profiler.events())
        assert packed == (route == "packed")
        torch.testing.assert_close(states[mask], reference[mask], rtol=1e-5, atol=1e-6)


def test_an_unknown_lstm_route_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEPINDUCE_LSTM_ROUTE", "fast")
    with pytest.raises(UsageError, match=r"^DEPINDUCE_LSTM_ROUTE='fast': expected packed or per-direction "
                                         r"\(or unset: per direction\)$"):
        BiLSTM(4, 3, 1, dropout=0.0)(torch.zeros(1, 2, 4), torch.ones(1, 2, dtype=torch.bool))


def test_the_compound_pcfgs_posterior_reads_the_packed_sequences_states(monkeypatch: pytest.MonkeyPatch) -> None:
    """q(z | x)'s mean and log-variance from the shared BiLSTM are what the packed nn.LSTM's states give (both
    poolings), and the gradients of the encoder's weights too."""
    from depinduce.data.vocab import Vocab
    from depinduce.models.cpcfg.config import CPCFGConfig
    from depinduce.models.cpcfg.model import CPCFG

    vocab = Vocab([f"w{i}" for i in range(30)])
    tokens = torch.randint(4, len(vocab), (3, 6), generator=torch.Generator().manual_seed(0))
    mask = torch.arange(6)[None] < torch.tensor([6, 2, 4])[:, None]
    for pooling in ("max", "mean"):
        torch.manual_seed(0)
        model = CPCFG(CPCFGConfig(nt=4, t=4, state_dim=8, z_dim=4, word_dim=6, lstm_dim=5,
                                         pooling=pooling), vocab)
        results = []
        for route in ("per-direction", "packed"):
            monkeypatch.setenv(LSTM_ROUTE_VARIABLE, route)
            model.zero_grad()
            mean, logvar = model.posterior(tokens, mask)
            (mean.sum() + logvar.square().sum()).backward()
            results.append([mean.detach(), logvar.detach(), *(p.grad.clone() for p in model.enc_rnn.parameters())])
        for got, want in zip(*results):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
