#!/usr/bin/env python3
"""Whether two builds are the same machine code, kernel by kernel: the check behind "later
commits change no machine code" (RESULTS.md) and "a variant's bundle is what its rule judged"
(NOTES.md). Each side is a binary or a bundle (make_bundle.sh's NAME.txz, whose binary of
that name is read). A kernel's SASS is compared without addresses and encodings; the hashes
nvcc puts in anonymous-namespace names (they follow the source file's path, so two checkouts
differ there alone) are blanked in names and in the code. Prints one line per kernel that
differs or is on one side only (instructions, LDL / STL each side), then the count of the same.
Exit status 0 when every kernel matching --kernel is the same on both sides, 1 otherwise.

  bench/attention/same_sass.py A B [--binary attention_cuda_test] [--kernel REGEX]
"""
import argparse
import os
import re
import sys
import tarfile
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sass

ANON = re.compile(r"(_GLOBAL__N__)[0-9a-f]{8}(_\d+_\w+?_)[0-9a-f]{8}")
INSN = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;")


def blank(text):
    return ANON.sub(r"\1H\2H", text)


def code(lines):
    return [blank(m.group(1)) for m in map(INSN.search, lines) if m]


def binary_of(side, name, tmp):
    if not side.endswith(".txz"):
        return side
    with tarfile.open(side) as t:
        member = next((m for m in t.getmembers() if os.path.basename(m.name) == name and m.isfile()),
                      None)
        if member is None:
            sys.exit(f"same_sass: no {name} in {side}")
        t.extract(member, tmp, filter="data")
        return os.path.join(tmp, member.name)


def spills(insns):
    return (sum(i.split()[0].startswith("LDL") for i in insns),
            sum(i.split()[0].startswith("STL") for i in insns))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--binary", default="attention_cuda_test")
    ap.add_argument("--kernel", default="")
    ap.add_argument("--cuobjdump")
    o = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sides = []
        for i, side in enumerate((o.a, o.b)):
            path = binary_of(side, o.binary, os.path.join(tmp, str(i)))
            sides.append({blank(k): code(v) for k, v in sass.kernels(path, o.kernel, o.cuobjdump).items()})
    a, b = sides
    if not a and not b:
        sys.exit(f"same_sass: no kernel matching {o.kernel!r}")
    names = sorted(a.keys() | b.keys())
    same = 0
    for name in names:
        if name in a and name in b and a[name] == b[name]:
            same += 1
            continue
        desc = [f"{len(s[name])} insns, LDL/STL {'/'.join(map(str, spills(s[name])))}" if name in s
                else "absent" for s in (a, b)]
        print(f"differs: {name}\n   A: {desc[0]}\n   B: {desc[1]}")
    print(f"same machine code: {same} of {len(names)} kernels")
    sys.exit(0 if same == len(names) else 1)

if __name__ == "__main__":
    main()
