import os, sys, time, tempfile
sys.path.insert(0, "/work/main/src")
mode = sys.argv[1]
if mode == "reorder":
    os.environ["AGENTLOG_DURABILITY"] = "relaxed"; os.environ["EXP_REORDER"] = "1"
else:
    os.environ["AGENTLOG_DURABILITY"] = mode
from agentlog.memory import service as S
from agentlog.bench.memory_steps import KINDS
root = tempfile.mkdtemp(dir="/tmp/exp")
xs = []
for i in range(1000):
    kind, attrs = KINDS[i % len(KINDS)]
    t = time.perf_counter()
    S.create(root, kind, f"memory {i} about tests and parsing", content=f"make target {i}", attributes=attrs,
             tags=["ci" if i % 3 == 0 else "style", f"t{i % 50}"])
    xs.append((time.perf_counter() - t) * 1e3)
xs.sort(); print(mode, f"p50 {xs[500]:.3f} p95 {xs[950]:.3f}")
