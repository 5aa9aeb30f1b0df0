#!/usr/bin/env python3
"""A/B of the hook path's import time: /work/base/src against /work/main/src, 150 fresh
`python -I -S` processes each in random order (bytecode cached). One-off of stop 21; the
two trees' paths are written in. Prints p50/p95 µs and the ratio.
"""
import subprocess, statistics, sys, os, random
env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
code = ("import time; t = time.perf_counter(); import sys; sys.path.insert(0, sys.argv[1]); "
        "import agentlog.capture.hook as h, agentlog.capture.adapters.claude_code, agentlog.capture.adapters.common, "
        "agentlog.capture.redact, agentlog.capture.project, agentlog.log.writer; "
        "c = __import__('agentlog.core.config' if sys.argv[2] == 'main' else 'agentlog.config'); "
        "print((time.perf_counter() - t) * 1e6)")
res = {"base": [], "main": []}
for r in range(150):
    order = ["base", "main"]; random.shuffle(order)
    for side in order:
        out = subprocess.run([sys.executable, "-I", "-S", "-c", code, f"/work/{side}/src", side], capture_output=True, text=True, env=env)
        res[side].append(float(out.stdout))
for side in res:
    xs = sorted(res[side][10:])
    print(side, "import of the hook path, us: p50 %.0f p95 %.0f mean %.0f" % (statistics.median(xs), xs[int(.95*(len(xs)-1))], statistics.fmean(xs)))
print("main/base p50 %.3f" % (statistics.median(res['main'][10:]) / statistics.median(res['base'][10:])))
