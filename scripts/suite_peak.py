#!/usr/bin/env python3
"""Run a command; sample the summed RSS and PSS of its process tree every 0.25 s.

    python scripts/suite_peak.py OUT.json COMMAND...

Writes wall time, exit code, the peak and the processes at the peak to OUT.json;
prints one summary line on stderr. How docs/benchmarks.md measured the test suite.
"""
import os, subprocess, sys, time, json

def tree(root):
    kids = {}
    for p in os.listdir('/proc'):
        if not p.isdigit(): continue
        try:
            with open(f'/proc/{p}/stat') as f: s = f.read()
            ppid = int(s.rsplit(')',1)[1].split()[1])
            kids.setdefault(ppid, []).append(int(p))
        except OSError: pass
    out, todo = [], [root]
    while todo:
        x = todo.pop(); out.append(x); todo.extend(kids.get(x, []))
    return out

def rss(pid):
    try:
        with open(f'/proc/{pid}/smaps_rollup') as f:
            r = p = 0
            for line in f:
                if line.startswith('Rss:'): r = int(line.split()[1])
                elif line.startswith('Pss:'): p = int(line.split()[1])
        with open(f'/proc/{pid}/cmdline','rb') as f: cmd = f.read().replace(b'\0', b' ')[:160].decode(errors='replace')
        return r, p, cmd
    except OSError: return 0, 0, ''

out = sys.argv[1]; cmd = sys.argv[2:]
t0 = time.time(); proc = subprocess.Popen(cmd)
peak = (0, 0, 0, []); samples = []
while proc.poll() is None:
    rows = [(pid,)+rss(pid) for pid in tree(proc.pid)]
    tr = sum(r[1] for r in rows); tp = sum(r[2] for r in rows)
    samples.append((round(time.time()-t0,2), tr, tp))
    if tp > peak[1]:
        peak = (round(time.time()-t0,2), tp, tr, sorted(rows, key=lambda r: -r[2])[:8])
    time.sleep(0.25)
wall = time.time()-t0
json.dump({'wall': wall, 'rc': proc.returncode, 'peak_pss_kib': peak[1], 'peak_rss_kib': max(s[1] for s in samples) if samples else 0,
           'peak_at': peak[0], 'top_at_peak': peak[3], 'samples': samples}, open(out, 'w'))
print(f"wall {wall:.0f}s rc {proc.returncode} peak PSS {peak[1]/1048576:.2f} GiB at {peak[0]}s; peak summed RSS {max(s[1] for s in samples)/1048576:.2f} GiB", file=sys.stderr)
sys.exit(proc.returncode)
