"""pytest setup: tests marked `gpu` need a Hopper GPU and are skipped (reported skipped, not passed)
without one. CODA_LIBRARY may point at a built libcoda instead of the installed package's. The
`stub_libcoda` fixture runs the ops' Python glue on CPU tensors against a stubbed libcoda."""
import pytest
import torch

from coda import _library as L


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


class _StubLibrary:
    """libcoda's functions replaced by stubs that check the argument count against the ctypes signature and
    succeed (a size query answers 256 bytes): the ops' Python glue runs end to end without a GPU."""

    def __init__(self, real):
        self.real, self.calls, self.arguments = real, [], []

    def __getattr__(self, name):
        real = getattr(self.real, name)
        if name not in L.SIGNATURES:
            return real

        def stub(*args):
            assert len(args) == len(L.SIGNATURES[name]), (name, len(args))
            self.calls.append(name)
            self.arguments.append(args)
            if name.endswith("_bytes"):
                args[-1]._obj.value = 256
            return L.OK

        return stub


@pytest.fixture
def stub_libcoda(monkeypatch):
    """CPU tensors accepted, libcoda stubbed, the backward ops registered for the CPU too."""
    from coda import _checks
    from coda.ops import cross_entropy, rmsnorm, rope, swiglu, transformer_layer
    stub = _StubLibrary(L.lib)
    monkeypatch.setattr(L, "lib", stub)
    monkeypatch.setattr(_checks, "DEVICES", ("cuda", "meta", "cpu"))
    monkeypatch.setattr(L, "stream", lambda device: None)
    monkeypatch.setattr(L, "on_device", lambda device: L._current)
    library = torch.library.Library("coda", "IMPL")
    for name, function in (("swiglu_backward", swiglu._swiglu_backward), ("rope_backward", rope._rope_backward),
                           ("residual_rmsnorm_backward", rmsnorm._backward_op),
                           ("linear_cross_entropy_backward", cross_entropy._backward_op),
                           ("layer_backward", transformer_layer._backward_op)):
        library.impl(name, function, "CPU")
    yield stub
    library._destroy()
