import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(__file__))
warnings.filterwarnings("ignore", message="Casting complex values to real discards")


import pytest
import torch

pytest_plugins = ["front_end_report"]


@pytest.fixture
def fresh_dynamo():
    """Dynamo's caches emptied before and after the test (each test compiles from scratch and
    leaves no compiled code behind), and a fixed seed."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    yield
    torch._dynamo.reset()
