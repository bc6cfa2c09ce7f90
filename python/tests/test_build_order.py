"""The build order of ``packer build --shuffle --seed S`` (docs/decisions.md) from Python: record i
of the dataset is input ``Permutation(N, S, 2**64 - 1).at(i)`` of the source's listing. The
values are pinned in pipeline/shuffle_test.go (TestBuildOrder) from Go's BuildOrder too."""
import numpy as np

from packer_reader._order import Permutation

BUILD_EPOCH = 2**64 - 1


def test_build_order_matches_go():
    assert Permutation(20, 5, BUILD_EPOCH).at(np.arange(20)).tolist() == [
        0, 14, 5, 11, 1, 18, 4, 19, 7, 15, 10, 17, 8, 9, 16, 3, 2, 6, 13, 12]
    assert Permutation(7, 2**64 - 1, BUILD_EPOCH).at(np.arange(7)).tolist() == [3, 1, 2, 6, 4, 0, 5]
