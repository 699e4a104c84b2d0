#!/usr/bin/env python3
"""The machine code of every kernel in a set of cubins, as fingerprints to compare two builds.

A refactoring that must not change any kernel (renamed namespaces, split headers, moved host code)
is checked by extracting the cubins of both builds and comparing the kernels' instruction bytes:

    cuobjdump -xelf all build/src/libcoda.so        # in an empty folder, for each build
    python3 scripts/kernel_fingerprints.py before/ after/

Each kernel's .text section is hashed; names are ignored (a renamed namespace changes every mangled
name), so the two builds must hold the same multiset of instruction streams. Prints the kernels
that differ and exits 1 when any does; with one folder, prints the fingerprints.
"""
import collections
import hashlib
import pathlib
import struct
import sys


def text_sections(path):
    """(section name, bytes) of every .text.* section of an ELF64 little-endian file."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise SystemExit(f"{path}: not an ELF64 file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_offset = headers[shstrndx][4]

    def name(offset):
        end = data.index(b"\0", names_offset + offset)
        return data[names_offset + offset:end].decode()

    for h in headers:
        section = name(h[0])
        if section.startswith(".text."):
            yield section[len(".text."):], data[h[4]:h[4] + h[5]]


def fingerprints(folder):
    """{fingerprint: [kernel names]} over every cubin in `folder`."""
    found = collections.defaultdict(list)
    for cubin in sorted(pathlib.Path(folder).glob("*.cubin")):
        for kernel, code in text_sections(cubin):
            found[f"{len(code):7d} {hashlib.sha256(code).hexdigest()[:16]}"].append(kernel)
    return found


def main(argv):
    if len(argv) == 2:
        for fp, kernels in sorted(fingerprints(argv[1]).items()):
            print(fp, len(kernels), kernels[0][:100])
        return 0
    if len(argv) != 3:
        print(__doc__)
        return 2
    before, after = fingerprints(argv[1]), fingerprints(argv[2])
    count = lambda fps: sum(len(k) for k in fps.values())
    differ = 0
    for fp in sorted(set(before) | set(after)):
        b, a = len(before.get(fp, [])), len(after.get(fp, []))
        if a != b:
            differ += 1
            print(f"{fp}: {b} before, {a} after: {(before.get(fp) or after.get(fp))[0][:120]}")
    print(f"{count(before)} kernels before, {count(after)} after; {differ} fingerprints differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
