"""pytest setup: tests marked `gpu` need a Hopper GPU and are skipped (reported skipped, not passed)
without one. CODA_LIBRARY may point at a built libcoda instead of the installed package's."""
import pytest
import torch


def hopper():
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a Hopper GPU (skipped without one)")


def pytest_collection_modifyitems(config, items):
    if hopper():
        return
    skip = pytest.mark.skip(reason="needs a Hopper (sm_90) GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
