import sys, time, tempfile, os, hashlib, json
sys.path.insert(0, "/work/main/src")
from agentlog.memory import exchange as X
root = sys.argv[1]
d = tempfile.mkdtemp(dir="/work/exp_t") + "/e"
T = {}
t = time.perf_counter()
con = X.connect(root)
rows = con.execute(f"SELECT {', '.join(X._EXPORTED)} FROM memories WHERE deleted = 0 ORDER BY id").fetchall()
ev = {}
for mid, ref in con.execute("SELECT memory_id, ref FROM evidence ORDER BY memory_id, seq"): ev.setdefault(mid, []).append(ref)
T["query"] = time.perf_counter() - t; t = time.perf_counter()
events = X._event_lines(root); T["events"] = time.perf_counter() - t; t = time.perf_counter()
datas = [(f"memories/{r[1]}/{r[3]}.md", X._memory_file(r, ev.get(r[0], []), []).encode()) for r in rows]
T["format"] = time.perf_counter() - t; t = time.perf_counter()
dirs = set()
for rel, data in datas: X._write_if_changed(os.path.join(d, rel), data, dirs, False)
T["files"] = time.perf_counter() - t; t = time.perf_counter()
files = {rel: hashlib.sha256(data).hexdigest() for rel, data in datas}
T["sha"] = time.perf_counter() - t; t = time.perf_counter()
nd = b"".join(e + b"\n" for e in events); X._write(os.path.join(d, "events.ndjson"), nd); files["events.ndjson"] = hashlib.sha256(nd).hexdigest()
T["ndjson"] = time.perf_counter() - t; t = time.perf_counter()
m = json.dumps({"files": dict(sorted(files.items()))}, indent=1, sort_keys=True)
T["manifest"] = time.perf_counter() - t
print(" ".join(f"{k}={v*1000:.0f}" for k, v in T.items()), f"total={sum(T.values())*1000:.0f}")
