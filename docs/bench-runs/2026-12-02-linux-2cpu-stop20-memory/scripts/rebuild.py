import os, sys, time, shutil
sys.path.insert(0, os.environ.get("SRC", "/work/main/src"))
from agentlog.memory import store
root = sys.argv[1]
orig = store.connect
if os.environ.get("CACHE"):
    def connect(root, path=None):
        c = orig(root, path)
        if path: c.execute(f"PRAGMA cache_size = {os.environ['CACHE']}")
        return c
    store.connect = connect
t = time.perf_counter(); n = store.rebuild(root); print(os.environ.get("CACHE", "default"), n, f"{(time.perf_counter()-t)*1000:.0f} ms")
