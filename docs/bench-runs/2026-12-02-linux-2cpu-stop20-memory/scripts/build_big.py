import os, sys, time
sys.path.insert(0, os.environ.get("SRC", "/work/main/src"))
os.environ["AGENTLOG_DURABILITY"] = "relaxed"
from agentlog.memory import service as S
from agentlog.bench.memory_steps import KINDS
root, n = sys.argv[1], int(sys.argv[2])
os.makedirs(root, exist_ok=True)
t = time.perf_counter(); ids = []
for i in range(n):
    kind, attrs = KINDS[i % len(KINDS)]
    m = S.create(root, kind, f"memory {i} about tests and parsing", content=f"make target {i}", attributes=attrs,
                 tags=["ci" if i % 3 == 0 else "style", f"t{i % 50}"])
    ids.append(m.id)
for j in range(int(n * 1.2)):
    mid = ids[(j * 7919) % len(ids)]
    if j % 2: S.edit(root, mid, tags=["ci", f"extra{j % 13}"])
    else: S.confirm(root, mid, actor="agent")
print("built", n, time.perf_counter() - t)
