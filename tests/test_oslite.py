"""The os-free path helpers of the hook path behave like os.path."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

from conftest import REPO

PARTS = ["", "a", "b", "..", ".", "/", "//", "///", "~", "~/x", "~root", "x/", "/y", "a.b", "é", " sp ", "a//b", "../..", "./c"]


def corpus() -> list[str]:
    rng = random.Random(7)
    out = ["", "/", "//", "///", ".", "..", "~", "~/", "a/b/c", "/a/../../b", "//x/y", "./a/./b/", "a/b/../../.."]
    for _ in range(3000):
        out.append("".join(rng.choice(PARTS) for _ in range(rng.randint(1, 6))))
    return out


CHILD = r"""
import sys, json
sys.path.insert(0, sys.argv[1])
from agentlog.core import oslite as o
assert o.LEAN and "os" not in sys.modules, "the lean path must be active here"
paths = json.loads(sys.stdin.read())
res = []
for p in paths:
    res.append([o.path.normpath(p), o.path.dirname(p), o.path.basename(p), o.path.isabs(p),
                o.path.join(p, "x"), o.path.join("base", p), o.path.abspath(p), o.path.expanduser(p)])
print(json.dumps(res))
"""


def test_lean_paths_match_os_path(tmp_path) -> None:  # type: ignore[no-untyped-def]
    paths = corpus()
    env = {"HOME": "/home/tester", "PATH": os.environ.get("PATH", "")}
    r = subprocess.run(
        [sys.executable, "-S", "-c", CHILD, str(REPO / "src")],
        input=json.dumps(paths), capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
    )
    assert r.returncode == 0, r.stderr
    lean = json.loads(r.stdout)
    old_home = os.environ.get("HOME")
    old_cwd = os.getcwd()
    os.environ["HOME"] = "/home/tester"
    os.chdir(tmp_path)
    try:
        for p, got in zip(paths, lean):
            want = [os.path.normpath(p), os.path.dirname(p), os.path.basename(p), os.path.isabs(p),
                    os.path.join(p, "x"), os.path.join("base", p), os.path.abspath(p), os.path.expanduser(p)]
            assert got == want, p
    finally:
        os.chdir(old_cwd)
        if old_home is None:
            del os.environ["HOME"]
        else:
            os.environ["HOME"] = old_home


def test_lean_file_checks(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "f").write_text("x")
    (tmp_path / "d").mkdir()
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from agentlog.core import oslite as o; d = sys.argv[2]\n"
        "print(o.path.isdir(d + '/d'), o.path.isfile(d + '/f'), o.path.isdir(d + '/f'), o.path.exists(d + '/nope'), "
        "o.path.isfile(d + '/d'), o.path.exists(d + '/f'), 'os' in sys.modules)"
    )
    r = subprocess.run([sys.executable, "-S", "-c", code, str(REPO / "src"), str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.stdout.split() == ["True", "True", "False", "False", "False", "True", "False"], r.stderr
