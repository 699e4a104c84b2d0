"""LM head + cross-entropy forward and backward through the C ABI, inside a Python process, against torch.

    python3 tests/python/cross_entropy_check.py build/test/src/libcoda.so [--require-gpu]

Without a Hopper GPU and torch: coda_cross_entropy_backward_workspace_bytes and
coda_gemm_cross_entropy_backward refuse bad arguments (CODA_INVALID_ARGUMENT, naming the argument)
and report CODA_UNSUPPORTED for good ones. With them: coda_gemm_cross_entropy then
coda_gemm_cross_entropy_backward against torch's autograd of F.cross_entropy in fp64 (label
smoothing, ignored rows, mean and sum, one chunk and several), dX and dW within 1e-2 relative.
Exit code 0 when every check passed.
"""
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from c_abi_check import (BF16, F32, I32, OK, CrossEntropyOptions, Memory, check, expect_refused, expect_runs,
                         finish, ref, relative_error, start, stream, torch, view)

MEAN, SUM = 2, 1


def arguments(abi, gpu):
    """Each function once with a bad argument and once with good ones."""
    mem = Memory(gpu)
    m, k, vocab = 64, 64, 1000
    size = ctypes.c_size_t(7)
    expect_refused(abi, abi.cross_entropy_backward_workspace_bytes(m, vocab, k, 100, ctypes.byref(size)),
                   "coda_cross_entropy_backward_workspace_bytes", "chunk_columns")
    check(abi.cross_entropy_backward_workspace_bytes(m, vocab, k, 0, ctypes.byref(size)) == OK and size.value > 0,
          "coda_cross_entropy_backward_workspace_bytes: " + abi.message())
    x, _ = mem.tensor(BF16, m, k, fill="randn")
    w, _ = mem.tensor(BF16, vocab, k, fill="randn")
    targets, _ = mem.tensor(I32, m)
    lse, _ = mem.tensor(F32, m)
    grad_loss, _ = mem.tensor(F32, 1)
    dx, _ = mem.tensor(BF16, m, k)
    dw, _ = mem.tensor(BF16, vocab, k)
    workspace, _ = mem.tensor(F32, size.value // 4)
    s = stream()
    expect_refused(abi, abi.gemm_cross_entropy_backward(ref(x), ref(w), ref(targets), ref(lse), ref(grad_loss), ref(dx),
                                                        ref(x), None, None, None, 0, workspace.data, size.value, s),
                   "coda_gemm_cross_entropy_backward", "grad_w")
    expect_runs(abi, gpu, abi.gemm_cross_entropy_backward(ref(x), ref(w), ref(targets), ref(lse), ref(grad_loss),
                                                          ref(dx), ref(dw), None, None, None, 0, workspace.data,
                                                          size.value, s),
                "coda_gemm_cross_entropy_backward")
    if gpu:
        torch.cuda.synchronize()


def against_torch(abi, m, k, vocab, smoothing, reduction, chunk):
    """Forward then backward against torch's autograd in fp64."""
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = (torch.randn(vocab, k, device="cuda") / 8).to(torch.bfloat16)
    targets = torch.randint(0, vocab, (m,), device="cuda", dtype=torch.int32)
    targets[1::7] = -100  # ignored rows (a single row stays: a mean over no rows is NaN)
    options = CrossEntropyOptions(-100, smoothing, 0.0, 0.0, reduction)
    s = stream()
    size = ctypes.c_size_t(0)
    loss = torch.empty(1, device="cuda")
    lse = torch.empty(m, device="cuda")
    check(abi.cross_entropy_workspace_bytes(m, vocab, ref(options), ctypes.byref(size)) == OK, abi.message())
    workspace = torch.empty(size.value, device="cuda", dtype=torch.uint8)
    check(abi.gemm_cross_entropy(ref(view(x, BF16)), ref(view(w, BF16)), ref(view(targets, I32)), ref(view(loss, F32)),
                                 ref(view(lse, F32)), ref(options), None, None, ctypes.c_void_p(workspace.data_ptr()),
                                 size.value, s) == OK, abi.message())
    grad_loss = torch.full((1,), 0.75, device="cuda")
    dx = torch.full_like(x, float("nan"))
    dw = torch.full_like(w, float("nan"))
    check(abi.cross_entropy_backward_workspace_bytes(m, vocab, k, chunk, ctypes.byref(size)) == OK, abi.message())
    workspace = torch.randint(-2**31, 2**31 - 1, ((size.value + 3) // 4,), device="cuda", dtype=torch.int32)
    check(abi.gemm_cross_entropy_backward(ref(view(x, BF16)), ref(view(w, BF16)), ref(view(targets, I32)),
                                          ref(view(lse, F32)), ref(view(grad_loss, F32)), ref(view(dx, BF16)),
                                          ref(view(dw, BF16)), ref(options), None, None, chunk,
                                          ctypes.c_void_p(workspace.data_ptr()), size.value, s) == OK, abi.message())
    x64 = x.double().requires_grad_()
    w64 = w.double().requires_grad_()
    want = torch.nn.functional.cross_entropy(x64 @ w64.T, targets.long(), ignore_index=-100, label_smoothing=smoothing,
                                             reduction="mean" if reduction == MEAN else "sum")
    (want * 0.75).backward()
    torch.cuda.synchronize()
    what = f"m={m} vocab={vocab} smoothing={smoothing} reduction={reduction} chunk={chunk}"
    check(abs(loss.item() - want.item()) < 1e-3 * abs(want.item()), f"loss {loss.item()} vs {want.item()} ({what})")
    for name, got, grad in (("dX", dx, x64.grad), ("dW", dw, w64.grad)):
        error = relative_error(got, grad)
        check(error < 1e-2, f"coda_gemm_cross_entropy_backward {name}: error {error:.2e} ({what})")


def main(argv):
    abi, gpu = start(argv, __doc__)
    if abi is None:
        return 2
    arguments(abi, gpu)
    if gpu:
        against_torch(abi, 257, 128, 3000, 0.1, MEAN, 0)
        against_torch(abi, 257, 128, 3000, 0.0, SUM, 1024)
        against_torch(abi, 1, 64, 50257, 0.0, MEAN, 0)
    return finish()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
