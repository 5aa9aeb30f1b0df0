import os, sys, time, tempfile
sys.path.insert(0, os.environ.get("SRC", "/work/main/src"))
os.environ["AGENTLOG_DURABILITY"] = sys.argv[1]
from agentlog.memory import service as S, store
from agentlog.log import writer
from agentlog.bench.memory_steps import KINDS
root = tempfile.mkdtemp(dir="/tmp/exp")
acc = {}
def wrap(mod, name, key):
    f = getattr(mod, name)
    def w(*a, **k):
        t = time.perf_counter(); r = f(*a, **k); acc.setdefault(key, []).append((time.perf_counter() - t) * 1e3); return r
    setattr(mod, name, w)
wrap(writer.SessionLog, "append", "append")
wrap(writer.SessionLog, "_sync", "sync")
wrap(writer.SessionLog, "_write_head", "head")
wrap(store, "_fold", "fold")
wrap(store, "_parse_all", "parse")
wrap(store, "_locked", "lockcm")
wrap(store, "_log_stamp", "stamp")
wrap(S, "_as_created", "as_created")
wrap(S, "check_recorded", "check")
wrap(store, "new_event", "new_event")
xs = []
for i in range(1000):
    kind, attrs = KINDS[i % len(KINDS)]
    t = time.perf_counter()
    S.create(root, kind, f"memory {i} about tests and parsing", content=f"make target {i}", attributes=attrs,
             tags=["ci" if i % 3 == 0 else "style", f"t{i % 50}"])
    xs.append((time.perf_counter() - t) * 1e3)
med = lambda v: sorted(v)[len(v)//2] if v else 0
tot = sum(med(v) for k, v in acc.items() if k not in ("sync", "head"))
print(sys.argv[1], f"create {med(xs):.3f}", " ".join(f"{k} {med(v):.3f}" for k, v in acc.items()), f"| other {med(xs) - tot:.3f}")
