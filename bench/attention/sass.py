"""The SASS of a binary's kernels, one list of lines per kernel, from cuobjdump: what
sass_order.py (the order of a Hopper kernel's waits) and same_sass.py (whether two builds are
the same machine code) read. cuobjdump is build/dev-tools/cuobjdump (scripts/fetch-cuobjdump.sh)
unless a path is given, else the one on PATH."""
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cuobjdump(path=None):
    tool = path or os.path.join(ROOT, "build", "dev-tools", "cuobjdump")
    if not os.access(tool, os.X_OK):
        tool = shutil.which("cuobjdump")
    if tool is None:
        sys.exit("no cuobjdump (scripts/fetch-cuobjdump.sh fetches one)")
    return tool


def split(lines, pattern=""):
    """{'kernel's mangled name [sm_NN]': its SASS lines} of cuobjdump -sass output, for the
    kernels whose name matches pattern. Keyed by architecture too: one kernel is compiled for
    each architecture the library targets (on sm_80 a Hopper-only kernel is an empty body)."""
    found, name, arch = {}, None, "?"
    for line in lines:
        m = re.search(r"arch = (sm_\w+)", line)
        if m:
            arch = m.group(1)
            continue
        m = re.search(r"Function : (\S+)", line)
        if m:
            name = f"{m.group(1)} [{arch}]" if re.search(pattern, m.group(1)) else None
            if name:
                found[name] = []
        elif name:
            found[name].append(line)
    return found


def kernels(binary, pattern="", tool=None):
    """split() of BINARY's SASS."""
    out = subprocess.run([cuobjdump(tool), "-sass", binary], check=True, capture_output=True,
                         text=True).stdout.splitlines()
    return split(out, pattern)
