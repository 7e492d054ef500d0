#!/usr/bin/env python3
"""scripts/check-paths.py on a fixture repository: it flags exactly the paths that point
nowhere and one machine's paths, and passes a tree without them.

    check_paths_test.py PATH/TO/check-paths.py
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

CHECKER = None

FILES = {
    "kernels/gemv.cu": "// Device code of kernels/gemv.h; see cpu/rope.h and dependent_launch.cuh.\n",
    "kernels/gemv.h": "#pragma once\n",
    "kernels/cpu/rope.h": "#pragma once\n",
    "kernels/dependent_launch.cuh": "#pragma once\n",
    "model/cpu/cpu_runner.h": "#pragma once\n",
    "README.md": "See [the notes](bench/NOTES.md), `kernels/`, and CONTRIBUTING.md.\n",
    "CONTRIBUTING.md": "x\n",
    "bench/NOTES.md": "Tables in ../README.md; K/V at 4 TB/s; `OUT_DIR/table.md`; "
                      "`--out table.md`; ggml-org/llama.cpp:ggml/src/ggml.h\n",
    "bench/serving/results/run1.md": "ran /work/main/.gpu/bin/flashserve\n",  # a record: not read
    "scripts/run.sh": "#!/bin/sh\n# Writes $OUT/summary.md; see ./run.sh and scripts/run.sh.\n",
    ".gitignore": "/build*/\n",
}


def git(repo, *args):
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


class CheckPathsTest(unittest.TestCase):
    def setUp(self):
        self.repo = tempfile.mkdtemp()
        for path, text in FILES.items():
            self.write(path, text)
        git(self.repo, "init", "-q")
        git(self.repo, "add", "-A")

    def tearDown(self):
        shutil.rmtree(self.repo)

    def write(self, path, text):
        full = os.path.join(self.repo, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)

    def run_checker(self):
        r = subprocess.run([sys.executable, CHECKER, "--root", self.repo], cwd=self.repo,
                           capture_output=True, text=True)
        return r.returncode, r.stdout.splitlines()

    def test_clean_tree_passes(self):
        rc, lines = self.run_checker()
        self.assertEqual((rc, lines), (0, []))

    def test_flags_each_kind_of_bad_path(self):
        self.write("model/runner.h",
                   "#pragma once\n"
                   "// Implemented by model/cpu_runner.* (see cuda_runner.h, METHOD.md).\n"
                   "const char* s = \"kernels/absent.h in a string is code, not a comment\";\n"
                   "/* docs/nothing.md\n   and build/bin/x.h (ignored) */\n")
        self.write("tests/data/README.md", "python3 -m venv /work/venvs/tok\n")
        self.write("tools/gen.py", '"""Writes kernels/gone.cu."""\n# and ../../outside.md\n')
        git(self.repo, "add", "-A")
        rc, lines = self.run_checker()
        self.assertEqual(rc, 1)
        self.assertEqual(sorted(lines), sorted([
            "model/runner.h:2: no such path model/cpu_runner.*",
            "model/runner.h:2: no such path cuda_runner.h",
            "model/runner.h:2: no such path METHOD.md",
            "model/runner.h:4: no such path docs/nothing.md",
            "tests/data/README.md:1: one machine's path /work/venvs/tok",
            "tools/gen.py:1: no such path kernels/gone.cu",
            "tools/gen.py:2: no such path ../../outside.md",
        ]))

    def test_untracked_files_count_as_existing(self):
        self.write("kernels/new_header.h", "#pragma once\n")  # not yet added to git
        self.write("kernels/user.h", "// see kernels/new_header.h\n")
        rc, lines = self.run_checker()
        self.assertEqual((rc, lines), (0, []))


if __name__ == "__main__":
    CHECKER = os.path.abspath(sys.argv.pop(1))
    unittest.main()
