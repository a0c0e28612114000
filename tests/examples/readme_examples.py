#!/usr/bin/env python3
"""The README's examples work as printed.

readme_examples.py SOURCE_DIR BUILD_DIR
  1. The C and C++ programs under "A first program" are, line for line, the
     files contrib/examples/hello.c and hello.cpp (built and run by the
     examples.hello_* entries), without their leading comment.
  2. The echo server block under "Servers and clients outside the job", pasted
     into a shell in a directory whose build/ is BUILD_DIR, prints the echo
     and stops the server.
Exits 1 with the difference or the shell's output when either is not so.
"""
import os
import re
import subprocess
import sys
import tempfile

source, build = sys.argv[1], sys.argv[2]
readme = open(os.path.join(source, "README.md"), encoding="utf-8").read()
failed = False


def block_after(marker):
    """The first indented (code) block after the paragraph holding marker."""
    i = readme.index(marker)
    i = readme.index("\n\n", i) + 2
    lines = []
    for line in readme[i:].split("\n"):
        if line.startswith("    ") or line == "":
            lines.append(line[4:])
        else:
            break
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"


for marker, name in (("**A first program**", "hello.c"), ("The same in C++", "hello.cpp")):
    text = open(os.path.join(source, "contrib", "examples", name), encoding="utf-8").read()
    body = re.sub(r"\A(/\*.*?\*/\n|(//[^\n]*\n)+)", "", text, flags=re.S)
    if block_after(marker) != body:
        print(f"readme_examples: the README's program differs from contrib/examples/{name}")
        failed = True

echo = block_after("`contrib/examples/` has an echo server")
with tempfile.TemporaryDirectory() as work:
    os.symlink(build, os.path.join(work, "build"))
    # Its own process group: a server left behind by a failure is killed.
    shell = subprocess.Popen(["sh", "-ec", echo], cwd=work, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = shell.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        out, err = "", "timed out after 60 s"
    finally:
        try:
            os.killpg(shell.pid, 9)
        except ProcessLookupError:
            pass
        shell.wait()
    if not (shell.returncode == 0 and out.startswith("hello\nworld\n") and "quit" in out):
        print("readme_examples: the README's echo block failed:")
        print(echo)
        print("stdout:", out)
        print("stderr:", err, "exit status:", shell.returncode)
        failed = True

if failed:
    sys.exit(1)
print("readme_examples: the programs and the echo block are as printed")
