#!/usr/bin/env python3
"""What one measured tool call walks through, read from a callgrind dump made with
--separate-callers (every function context carries its chain of callers).

  bench/call_path.py DUMP [ROOT=.] [-v]

Counts only the call's own work: the call chains that pass through the MCP face (`src/mcp/`:
its handler and the tasks it spawns, such as a forward) or the bearer check in front of it. The
broker's background loops and the in-process demo provider answering it are left out.

Prints the crate's source files (under ROOT/src/) that ran code, and every file a chain comes
back to after leaving it for another file, with the most times one chain enters it. A closure
that a function passes down and that is called back while that function is still on the chain
is read where it is written, inside its caller: it is no re-entry."""
import os
import re
import sys
from collections import defaultdict

ROOT = "."
def crate_file(path):
    if path is None or "/.cargo/" in path or "/rustc/" in path:
        return None
    m = re.search(r"(?:^|/)(src/.*\.rs)$", path)
    if not m or not os.path.isfile(os.path.join(ROOT, m.group(1))):
        return None
    return m.group(1)

def parse(path):
    names, files = {}, {}
    fn_file = {}
    self_cost = defaultdict(lambda: defaultdict(int))  # context -> file -> own instructions
    cur_fl = cur_file = cur_fn = None
    in_call = False
    def ref(table, text):
        m = re.match(r"\((\d+)\)(?: (.*))?$", text)
        if not m:
            return text
        if m.group(2) is not None:
            table[m.group(1)] = m.group(2)
        return table[m.group(1)]
    with open(path, errors="replace") as f:
        for raw in f:
            line = raw.rstrip("\n")
            if line.startswith("fl="):
                cur_fl = cur_file = ref(files, line[3:])
            elif line.startswith(("fi=", "fe=")):
                cur_file = ref(files, line[3:])
            elif line.startswith("fn="):
                cur_fn = ref(names, line[3:])
                cur_file = cur_fl
                fn_file[cur_fn] = cur_fl
            elif line.startswith("cfn="):
                ref(names, line[4:])
            elif line.startswith(("cfi=", "cfl=")):
                ref(files, line[4:])
            elif line.startswith("calls="):
                in_call = True
            elif line and (line[0].isdigit() or line[0] in "+-*"):
                if in_call:
                    in_call = False  # a call's inclusive cost: not the caller's own
                    continue
                parts = line.split()
                if len(parts) >= 2 and cur_fn is not None:
                    self_cost[cur_fn][cur_file] += int(parts[1])
    return fn_file, self_cost

def main():
    global ROOT
    args = [a for a in sys.argv[1:] if a != "-v"]
    dump = args[0]
    ROOT = args[1] if len(args) > 1 else "."
    fn_file, self_cost = parse(dump)
    base_file = {}
    for name, fl in fn_file.items():
        base_file.setdefault(name.split("'")[0], fl)
    visited = defaultdict(int)
    worst = defaultdict(int)
    example = {}
    for context, costs in self_cost.items():
        frames = context.split("'")[::-1]  # root first
        crate_frames = [(fr, crate_file(base_file.get(fr))) for fr in frames]
        crate_frames = [(fr, c) for fr, c in crate_frames if c]
        if not any(c.startswith("src/mcp/") or c == "src/identity/bearer.rs" for _, c in crate_frames):
            continue
        for file, n in costs.items():
            c = crate_file(file)
            if c:
                visited[c] += n
        seq = []
        on_chain = []
        for fr, c in crate_frames:
            callback = any(fr.startswith(earlier + "::") for earlier in on_chain)
            on_chain.append(fr)
            if callback:
                continue
            if not seq or seq[-1] != c:
                seq.append(c)
        counts = defaultdict(int)
        for c in seq:
            counts[c] += 1
        for c, n in counts.items():
            if n > worst[c]:
                worst[c] = n
                example[c] = seq
    reentered = {c: n for c, n in worst.items() if n > 1}
    print(f"files that ran code: {len(visited)}")
    print(f"files a chain comes back to: {len(reentered)}")
    for c, n in sorted(reentered.items(), key=lambda kv: (-kv[1], kv[0])):
        path = " -> ".join(s.removeprefix("src/") for s in example[c])
        print(f"  {c.removeprefix('src/')}: entered {n} times on one chain: {path}")
    if "-v" in sys.argv:
        for f in sorted(visited):
            print(f"  {f}: {visited[f]} instructions")

main()
