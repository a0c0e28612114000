#!/usr/bin/env python3
"""Fails when the documentation names code that does not exist.

Every back-quoted name in the user and design documentation that looks like a
code name must occur in the source tree (every file that is not Markdown,
build trees and .git left out):

  - a qualified name, `Class::member`, `btl::Rdma`, `Dispatch::recv<wire::match>`:
    every part (template arguments dropped) occurs as a word in one file;
  - a call, `function_name()` or `Class::member()`: the name occurs as a word;
  - a snake_case identifier (lower case, at least one underscore), also as a
    word of a command in back quotes (`transit_bench rpc --listen`): it occurs
    as a word, is the name of a file (a fuzz corpus entry), or is a test name
    CMake composes (test_btl_util_${unit}). A name of a parameter's shape (btl_, bml_, pml_, runtime_,
    mca_) that is not found is left to docs.param_names, which asks
    transit_info for every parameter;
  - a CamelCase type name, `VaderModule`, `FreeList<T>`: it occurs as a word;
  - a file or folder path, `components/vader/vader_module.cpp`,
    `pml/engine.hpp`, `vader_fastbox.hpp`: some file or folder of the tree
    ends with it (or with it and .in, the template CMake fills). Absolute
    paths, build outputs (build/...), an installation's layout (lib/,
    share/, etc/, bin/) and paths with placeholders (<name>, *, $VAR, {a,b})
    are not checked; a bare file name the build writes (TransitTargets.cmake)
    is found by its stem.

A name placed in a file, `Sender::send_inline` (`pml/sender.cpp`), as the
walks through the code write it, must occur in that file.

The checker's own folder (tests/docs) is not part of the tree it searches: it
names stale names on purpose.

Names that are legitimately outside the tree (another library's functions, a
kernel's) are listed in an allow-list, one a line, each with its reason:
    name    # why it is not ours

usage: check_code_names.py [--source DIR] [--allow FILE] [DOC ...]
With no DOC, checks docs/*.md, README.md and the component, pml, runtime and
contrib READMEs, and also fails on an allow-list entry no document uses any
more. Prints each unknown name with its file and line, and exits 1 if there is
any.
"""
import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SNAKE = re.compile(r"^_?[a-z][a-z0-9]*(?:_[a-z0-9]+)+_?$")
CAMEL = re.compile(r"^[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+$")
PARAM_SHAPE = re.compile(r"^(?:btl|bml|pml|runtime|mca)_[a-z0-9]+_")
SOURCE_EXT = (".cpp", ".hpp", ".h", ".c", ".cc", ".sh", ".py", ".cmake", ".txt", ".md",
              ".in", ".png", ".awk", ".proto", ".supp", ".conf", ".h2m")
SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
FENCE = re.compile(r"^\s*(```|~~~)")
# The layout of an installation (lib/cmake/Transit, share/man), not of the tree.
INSTALL_TREE = ("lib/", "share/", "etc/", "bin/", "libexec/")
SKIP_DIRS = {".git", "__pycache__"}
TEXT_EXT = (".cpp", ".hpp", ".h", ".c", ".cc", ".sh", ".py", ".cmake", ".txt", ".in",
            ".awk", ".proto", ".supp", ".conf", ".h2m", ".1", ".3", ".7", ".json", ".yml")


def default_docs(src):
    d = os.path.join(src, "docs")
    docs = [os.path.join(d, f) for f in sorted(os.listdir(d)) if f.endswith(".md")]
    docs.append(os.path.join(src, "README.md"))
    for parent in ("components", "contrib"):
        d = os.path.join(src, parent)
        for sub in sorted(os.listdir(d)):
            readme = os.path.join(d, sub, "README.md")
            if os.path.isfile(readme):
                docs.append(readme)
    for readme in ("pml/README.md", "runtime/README.md"):
        if os.path.isfile(os.path.join(src, readme)):
            docs.append(os.path.join(src, readme))
    return docs


def is_build_tree(path):
    return (os.path.basename(path).startswith("build")
            or os.path.exists(os.path.join(path, "CMakeCache.txt")))


# A name CMake puts together, test_btl_util_${unit} or ${t}_netns: the
# literal parts with anything between them.
COMPOSED = re.compile(r"[A-Za-z0-9_]*\$\{[A-Za-z0-9_]+\}[A-Za-z0-9_${}]*")


def composed_pattern(token):
    parts = re.split(r"\$\{[A-Za-z0-9_]+\}", token)
    if sum(len(p) for p in parts) < 4:
        return None
    return "[a-z0-9_]+".join(re.escape(p) for p in parts)


def scan_tree(src, needed):
    """Word -> set of file ids (for the words in `needed` only: the index of
    every word would cost most of the run), every relative file and folder
    path, one regular expression matching the names CMake composes, and each
    file's id."""
    words = {}
    paths = set()
    composed = set()
    file_ids = {}
    fid = 0
    for root, dirs, files in os.walk(src):
        rel_root = os.path.relpath(root, src)
        # This folder names stale names on purpose (its fixture, its tests).
        dirs[:] = [d for d in dirs
                   if d not in SKIP_DIRS and not is_build_tree(os.path.join(root, d))
                   and os.path.abspath(os.path.join(root, d)) != HERE]
        if rel_root != ".":
            paths.add(rel_root)
        for name in files:
            rel = os.path.normpath(os.path.join(rel_root, name))
            paths.add(rel)
            if name.endswith(".md"):
                continue
            if not (name.endswith(TEXT_EXT) or name == "CMakeLists.txt" or "." not in name):
                continue
            try:
                with open(os.path.join(root, name), encoding="utf-8", errors="replace") as f:
                    text = f.read()
            except OSError:
                continue
            fid += 1
            file_ids[rel] = fid
            for w in needed.intersection(WORD.findall(text)):
                words.setdefault(w, set()).add(fid)
            if name == "CMakeLists.txt" or name.endswith(".cmake"):
                for tok in set(COMPOSED.findall(text)):
                    pattern = composed_pattern(tok)
                    if pattern:
                        composed.add(pattern)
    composed_re = re.compile("|".join(f"(?:{p})" for p in sorted(composed)) or "(?!)")
    return words, paths, composed_re, file_ids


def load_allow(path):
    allow = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, reason = line.partition("#")
            name, reason = name.strip(), reason.strip()
            if not reason:
                sys.exit(f"{path}:{n}: {name} has no reason (write: name  # why)")
            allow[name] = reason
    return allow


def lines(doc):
    """(line number, line) outside fenced code blocks."""
    fenced = False
    with open(doc, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                yield n, line


def drop_templates(text):
    out, depth = [], 0
    for ch in text:
        if ch == "<":
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def path_candidates(tok, top):
    """A path of the tree: with a source file's extension, or under one of
    the tree's top-level entries. `engine.hpp/.cpp` names two files."""
    if (tok.startswith(("/", "~", "build/", "./build", "http") + INSTALL_TREE) or "//" in tok
            or any(c in tok for c in "<>*{}$%")):
        return
    if not re.fullmatch(r"[A-Za-z0-9_.+-]+(/[A-Za-z0-9_.+-]+)*/?", tok):
        return
    tok = tok.rstrip("/")
    if "/." in tok:
        stem, _, ext = tok.rpartition("/")
        base = stem.rsplit(".", 1)[0]
        yield stem
        yield base + ext
    elif tok.endswith(SOURCE_EXT) or tok.split("/")[0] in top:
        yield tok


def candidates(span, top):
    """(kind, name) of each code-like name in one back-quoted span."""
    tokens = span.split()
    whole = len(tokens) == 1
    for tok in tokens:
        tok = tok.rstrip(",.;:")
        if not tok or tok.startswith(("-", "$")) or "=" in tok:
            continue
        if "/" in tok:
            for path in path_candidates(tok, top):
                yield "path", path
            continue
        call = tok.endswith(")") and "(" in tok
        bare = drop_templates(tok.split("(")[0]) if call else drop_templates(tok)
        if "::" in bare:
            parts = bare.split("::")
            if parts[0] == "":
                parts = parts[1:]
            if parts and all(IDENT.match(p) for p in parts):
                yield "qualified", "::".join(parts)
            continue
        if not IDENT.match(bare):
            if whole and bare.endswith(SOURCE_EXT) and re.fullmatch(r"[A-Za-z0-9_.+-]+", bare):
                yield "path", bare
            continue
        if call:
            yield "call", bare
        elif SNAKE.match(bare):
            yield "snake", bare
        elif whole and CAMEL.match(bare):
            yield "type", bare


# `name` (`path`...): a name placed in a file, as the walks through the code write
# it: the name's last part must occur in that file.
PLACED = re.compile(r"`([A-Za-z_][A-Za-z0-9_:<>]*)(?:\(\))?` \(`([A-Za-z0-9_./-]+\.[a-z]+)`")


def placed(doc_line, file_ids, words):
    """(name, path) pairs of one line whose name does not occur in the path."""
    for m in PLACED.finditer(doc_line):
        name, path = drop_templates(m.group(1)), m.group(2)
        if "::" not in name and "_" not in name:
            continue
        ids = {fid for rel, fid in file_ids.items() if rel == path or rel.endswith("/" + path)}
        if not ids:
            continue  # an unknown path is reported as such
        last = name.split("::")[-1]
        if not (words.get(last, set()) & ids):
            yield name, path


def found(kind, name, tree):
    words, paths, basenames, composed = tree
    if kind == "path":
        if name in paths or name + ".in" in paths:
            return True
        # A file the build writes (TransitTargets.cmake): its stem is a word.
        return "/" not in name and name.rsplit(".", 1)[0] in words
    if kind == "qualified":
        sets = [words.get(p) for p in name.split("::")]
        if any(s is None for s in sets):
            return False
        return bool(set.intersection(*sets))
    if name in words:
        return True
    # A test or corpus file named as a word, or a test name CMake composes.
    return kind == "snake" and (name in basenames or bool(composed.fullmatch(name)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default=os.path.normpath(os.path.join(HERE, "..", "..")))
    ap.add_argument("--allow", default=os.path.join(HERE, "external_names.txt"))
    ap.add_argument("docs", nargs="*")
    args = ap.parse_args()
    src = os.path.abspath(args.source)
    docs = [os.path.abspath(d) for d in args.docs] or default_docs(src)
    allow = load_allow(args.allow)
    top = {e for e in os.listdir(src) if e not in SKIP_DIRS
           and not is_build_tree(os.path.join(src, e))}
    # Every document's names first, so that the tree is indexed for them alone.
    found_in_docs = []  # (doc, line, text, [(kind, name)])
    needed = set()
    for doc in docs:
        for line, text in lines(doc):
            names = [c for m in SPAN.finditer(text) for c in candidates(m.group(1).strip(), top)]
            for m in PLACED.finditer(text):
                needed.add(drop_templates(m.group(1)).split("::")[-1])
            if names or "`" in text:
                found_in_docs.append((doc, line, text, names))
            for kind, name in names:
                if kind == "path":
                    needed.add(name.rsplit(".", 1)[0])
                else:
                    needed.update(name.split("::"))
    words, paths, composed, file_ids = scan_tree(src, needed)
    basenames = {os.path.basename(p) for p in paths}
    # Every tail of every path: pml/engine.hpp and engine.hpp both name
    # pml/engine.hpp.
    tails = set()
    for p in paths:
        parts = p.split("/")
        tails.update("/".join(parts[i:]) for i in range(len(parts)))
    tree = (words, tails, basenames, composed)

    checked, bad, used_allow = set(), [], set()
    for doc, line, text, names in found_in_docs:
        rel = os.path.relpath(doc, src)
        for name, path in placed(text, file_ids, words):
            bad.append(f"{rel}:{line}: `{name}` is not in {path}")
        for kind, name in names:
            checked.add(name)
            if name in allow:
                used_allow.add(name)
                continue
            if found(kind, name, tree):
                continue
            if kind == "snake" and PARAM_SHAPE.match(name):
                continue  # a parameter: docs.param_names checks it
            bad.append(f"{rel}:{line}: `{name}` ({kind}) does not occur in the source tree")
    unused = [] if args.docs else sorted(set(allow) - used_allow)
    for name in unused:
        bad.append(f"{os.path.relpath(args.allow, src)}: `{name}` is allowed but no document "
                   "names it: remove it")
    for b in bad:
        print("code_names: " + b)
    if bad:
        print(f"code_names: FAILED ({len(bad)} of {len(checked)} names)")
        return 1
    print(f"code_names: {len(checked)} names in {len(docs)} documents checked, all found")
    return 0


if __name__ == "__main__":
    sys.exit(main())
