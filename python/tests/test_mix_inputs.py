"""Mixtures refuse an epoch or a state that no run of the Go reader could give, rather than read
another order: a negative epoch (Go's is unsigned; with replacement it put the stream's positions
past 2^40, where the split tree's arithmetic means nothing), or an epoch or position that is not
an integer (int(2.7) read epoch 2; a damaged state restored to another place)."""
import numpy as np
import pytest

from packer_reader import mixture as mixmod


@pytest.mark.parametrize("replacement", [True, False])
@pytest.mark.parametrize("epoch", [-1, 1.5, True, "1", np.float64(2.0)])
def test_epoch_must_be_an_unsigned_integer(replacement, epoch):
    m = mixmod.Mixture([100, 50], [0.5, 0.5], seed=3, replacement=replacement)
    for call in (lambda: m.at(epoch, [0]), lambda: m.order(8, epoch=epoch), lambda: m.state(epoch, 0),
                 lambda: m.summary(epoch)):
        with pytest.raises((TypeError, ValueError), match="epoch"):
            call()


def test_numpy_integer_epochs_read_as_ints():
    m = mixmod.Mixture([100, 50], [0.5, 0.5], seed=3)
    for e in (np.int64(2), np.uint64(2), np.int32(2)):
        a, b = m.at(e, [0, 5, 9]), m.at(2, [0, 5, 9])
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
        assert m.state(e, 7) == m.state(2, 7)


@pytest.mark.parametrize("key,value", [("epoch", 2.7), ("epoch", -1), ("epoch", "2"), ("position", 10.9),
                                       ("position", True), ("position", "10"), ("epoch", None)])
def test_restore_refuses_a_damaged_state(key, value):
    m = mixmod.Mixture([100, 50], [0.5, 0.5], seed=3)
    state = m.state(2, 10)
    assert m.restore(state) == (2, 10)
    state[key] = value
    with pytest.raises((TypeError, ValueError), match=key):
        m.restore(state)
