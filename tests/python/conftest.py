"""Shared fixtures of the Python suite. Every test starts from the same global state: seeded
generators, grad mode and training mode on."""

import numpy as np
import pytest

import encore


@pytest.fixture(autouse=True)
def fresh_state():
    encore.manual_seed(0)
    encore._C._set_grad_enabled(True)
    encore.set_training(True)
    yield
    encore._C._set_grad_enabled(True)
    encore.set_training(True)


@pytest.fixture
def rng():
    return np.random.default_rng(0)
