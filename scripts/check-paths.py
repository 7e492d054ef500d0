#!/usr/bin/env python3
"""Lists repository paths named in comments and documents that do not exist.

    scripts/check-paths.py [--root DIR] [FILE...]

Reads the tracked files (`git ls-files`, or the FILEs given, relative to the repository
root): the whole text of documents (.md), the comments of source files (`//` and `/* */` in
C++, CUDA and proto; `#` in Python, shell, CMake, YAML and Dockerfiles, plus Python's
triple-quoted strings). Exit status 1 when anything is flagged, else 0.

A word is taken as a path when it has a `/` or ends in a file extension. It must name something
that exists:
- `kernels/gemv.cu`, `model/cpu/cpu_runner.*`, `server/api/`, `./test.sh`, `../README.md`: a
  path whose first part is a top-level folder of the repository, `.` or `..` is relative to
  the file's own folder or one above it, up to the root (globs and {a,b} allowed);
- `cpu/rope.h`, `dependent_launch.cuh`: any other path or bare file name ending in the extension
  of a source or document of ours (.h .cc .cu .cuh .py .sh .md .proto .cmake) is relative to
  the file's folder, or else the tail of some repository path.
Not checked: other paths (K/V, TFLOP/s, `$OUT/table.md`, `${CMAKE_BINARY_DIR}/x.h`), upper-case
placeholders (`OUT_DIR/results.md`), file names given to a command-line option
(`--out table.md`), URLs, system headers in angle brackets (`<cuda_runtime_api.h>`), protoc's
generated headers (`flashserve/v1/generation.grpc.pb.h`), paths under git-ignored
folders (`build/`, `models/`), recorded results (`bench/*/results/`: measurements, not
documents) and paths in another repository or revision, written with it in front:
`ggml-org/llama.cpp:ggml/src/ggml-quants.c`, `7cc94dc:kernels/old_name.cuh` (git show's
form). Absolute paths are not checked either, except one machine's folders (a home folder,
/root, /work), which are flagged wherever they appear.
"""
import argparse
import fnmatch
import glob
import io
import os
import re
import subprocess
import sys
import tokenize

# Extensions of our sources and documents: a word ending in one is a path wherever it is.
OUR_EXTENSIONS = ("h", "cc", "cu", "cuh", "py", "sh", "md", "proto", "cmake")
# Further extensions of repository files, checked when the path is anchored.
EXTENSIONS = OUR_EXTENSIONS + ("txt", "yml", "yaml", "json", "csv", "toml", "supp", "gguf")
SKIPPED = re.compile(r"^bench/[^/]+/results/")
C_LIKE = (".h", ".hpp", ".c", ".cc", ".cpp", ".cu", ".cuh", ".proto")
HASH_LIKE = (".py", ".sh", ".cmake", ".yml", ".yaml", ".toml", ".supp")
HASH_NAMES = ("CMakeLists.txt", "Dockerfile")
URL = re.compile(r"\b[a-z][a-z0-9+.-]*://\S+")
# owner/repo:path names a file of another repository, commit:path one of another revision.
OTHER_REPO = re.compile(r"\b(?:[\w.-]+/[\w.-]+|[0-9a-f]{7,40}(?:~\d*|\^)?):[\w./*{},-]+")
MACHINE_PATH = re.compile(r"(?<![\w.$}-])(?:~|/home|/root|/Users|/work)/[\w./-]*")
WORD = re.compile(r"(?<![\w/.:$@}*-])((?:\.\.?/)*[\w*{][\w.*{},-]*(?:/[\w.*{},-]+)*/?)")
HAS_EXT = re.compile(r"\.(" + "|".join(EXTENSIONS) + r")\*?$")
HAS_OUR_EXT = re.compile(r"\.(" + "|".join(OUR_EXTENSIONS) + r")\*?$")
# ${VAR}/path, $VAR/path, <system/header.h>, protoc's generated x.pb.h / x.grpc.pb.cc
NOT_OURS = re.compile(r"\$\{[^}]*\}\S*|\$\w+/\S*|<[\w./+-]+>|[\w./-]+\.pb\.(?:h|cc)\b")


def c_comments(text):
    """Yields (line, comment) for // and /* */ comments, skipping string and char literals."""
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            yield line, text[i + 2:j]
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j
            yield line, text[i + 2:j]
            line += text.count("\n", i, j)
            i = j + 2
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not text[i - 1].isalnum()):
            m = re.match(r'R"([^()\\ ]{0,16})\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            line += text.count("\n", i, j)
            i = j
        elif c in "\"'" and not (c == "'" and i > 0 and text[i - 1].isalnum()):
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:
            i += 1


def python_comments(text):
    """Yields (line, comment) for the comments and docstrings (strings standing alone as a
    statement) of Python source; falls back to # lines when it does not tokenize."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        yield from hash_comments(text)
        return
    statement_start = True
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string[1:]
        elif tok.type == tokenize.STRING and statement_start:
            for offset, line in enumerate(tok.string.split("\n")):
                yield tok.start[0] + offset, line
        if tok.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            statement_start = True
        elif tok.type not in (tokenize.NL, tokenize.COMMENT):
            statement_start = False


def hash_comments(text):
    """Yields (line, comment) for # comments (shell, CMake, YAML)."""
    for number, line in enumerate(text.split("\n"), 1):
        m = re.search(r"(?:^|\s)#(?![!{])(.*)$", line)
        if m and not re.match(r"\s*(include|define|pragma|if|endif)\b", m.group(1)):
            yield number, m.group(1)


def documented_text(path, text):
    name = os.path.basename(path)
    if path.endswith(".md"):
        return [(number, line) for number, line in enumerate(text.split("\n"), 1)]
    if path.endswith(C_LIKE):
        return list(c_comments(text))
    if path.endswith(".py"):
        return list(python_comments(text))
    if path.endswith(HASH_LIKE) or name in HASH_NAMES:
        return list(hash_comments(text))
    return []


def expand_braces(word):
    m = re.search(r"\{([^{}]*)\}", word)
    if not m:
        return [word]
    out = []
    for alt in m.group(1).split(","):
        out.extend(expand_braces(word[:m.start()] + alt + word[m.end():]))
    return out


class Repo:
    def __init__(self, root):
        self.root = root
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=root, capture_output=True, text=True,
                             check=True).stdout
        self.files = [f for f in out.split("\n") if f and os.path.exists(os.path.join(root, f))]
        self.dirs = {os.path.dirname(f) for f in self.files}
        for d in list(self.dirs):
            while d:
                self.dirs.add(d)
                d = os.path.dirname(d)
        self.paths = set(self.files) | self.dirs
        self.top = {p.split("/")[0] for p in self.files if "/" in p}
        self.basenames = {os.path.basename(f) for f in self.files}
        self.ignored_tops = []
        gitignore = os.path.join(root, ".gitignore")
        if os.path.exists(gitignore):
            with open(gitignore, encoding="utf-8") as f:
                for line in f:
                    m = re.fullmatch(r"/([^/\s]+)/?", line.strip())
                    if m:
                        self.ignored_tops.append(m.group(1))

    def ignored(self, first):
        """Whether a top-level name is one of .gitignore's root folders (/build*/, /models/)."""
        return any(fnmatch.fnmatchcase(first, pattern) for pattern in self.ignored_tops)

    def exists(self, rel):
        rel = os.path.normpath(rel)
        if any(ch in rel for ch in "*?["):
            return any(fnmatch.fnmatchcase(p, rel) for p in self.paths) or bool(
                glob.glob(os.path.join(self.root, rel)))
        return rel in self.paths

    def tail_exists(self, word):
        if any(ch in word for ch in "*?["):
            return any(fnmatch.fnmatchcase(p, word) or fnmatch.fnmatchcase(p, "*/" + word)
                       for p in self.paths)
        return any(p == word or p.endswith("/" + word) for p in self.paths)

    def resolves(self, word, folder):
        """Whether a path word named in a file under `folder` exists (see the module doc)."""
        word = word.rstrip("/")
        parts = word.split("/")
        if parts[0] in (".", "..") or (len(parts) > 1 and parts[0] in self.top):
            while True:
                if self.exists(os.path.join(folder, word)):
                    return True
                if not folder:
                    return False
                folder = os.path.dirname(folder)
        if (len(parts) > 1 and self.ignored(parts[0])) or not HAS_OUR_EXT.search(word):
            return True
        return self.exists(os.path.join(folder, word)) or self.tail_exists(word)


def path_words(comment):
    """Yields the words of `comment` that look like paths (placeholders such as OUT_DIR/x.md,
    an upper-case first part, are not)."""
    comment = URL.sub(" ", comment)
    comment = OTHER_REPO.sub(" ", comment)
    comment = NOT_OURS.sub(" ", comment)
    for m in WORD.finditer(comment):
        word = m.group(1).rstrip(".,;:")
        if "/" not in word and re.search(r"(?:^|[\s\[(`])--?[\w-]+[ =]$", comment[:m.start()]):
            continue  # a file name given to a command-line option: the user's choice
        if "/" not in word and not HAS_EXT.search(word):
            continue
        if re.match(r"[A-Z][A-Z0-9_]*/", word):
            continue
        yield word


def check_file(repo, path):
    try:
        with open(os.path.join(repo.root, path), encoding="utf-8") as f:
            text = f.read()
    except (UnicodeDecodeError, OSError):
        return []
    problems = []
    folder = os.path.dirname(path)
    for line, comment in documented_text(path, text):
        for m in MACHINE_PATH.finditer(URL.sub(" ", comment)):
            problems.append(f"{path}:{line}: one machine's path {m.group(0)}")
        for word in path_words(comment):
            candidates = expand_braces(word)
            missing = [c for c in candidates if not repo.resolves(c, folder)]
            if missing:
                problems.append(f"{path}:{line}: no such path {word}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", help="the repository (default: the one holding this script)")
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    root = args.root or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    repo = Repo(root)
    files = args.files or [f for f in repo.files if not SKIPPED.match(f)]
    problems = []
    for path in files:
        for problem in check_file(repo, path):
            if problem not in problems:
                problems.append(problem)
    for p in problems:
        print(p)
    if problems:
        print(f"check-paths: {len(problems)} path(s) named in comments or documents do not exist",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
