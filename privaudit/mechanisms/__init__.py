"""The math kernels shared by defenses and attacks, written once and vectorised.

- :func:`~privaudit.mechanisms.noise.sample_dx_noise`: the multivariate d_X-privacy noise of
  Feyisetan et al. 2020;
- :func:`~privaudit.mechanisms.laplace.sample_laplace`: Laplace noise (CAPE, DPNR);
- :class:`~privaudit.mechanisms.nearest.NearestNeighbourIndex`: exact Euclidean
  nearest-neighbour projection onto an embedding matrix, batched and exactly pruned.
"""

from privaudit.mechanisms.laplace import check_epsilon, sample_laplace
from privaudit.mechanisms.nearest import NearestNeighbourIndex
from privaudit.mechanisms.noise import check_eta, sample_dx_noise

__all__ = [
    "NearestNeighbourIndex",
    "check_epsilon",
    "check_eta",
    "sample_dx_noise",
    "sample_laplace",
]
