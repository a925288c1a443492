"""Time to first result of a fresh `stitch` process: cold, from a warm disk cache, and from a warm
remote (Redis) cache with an empty disk (README "A fleet shares compiled kernels").

Each sample is one whole process, `stitch run FILE --backend cpu` (no --check, no --iters), timed
from its start to its exit: parsing, making the engine (the JIT, the host profile), then for every
graph planning (or not), compiling (or loading) and one run, and printing the outputs' summaries.
The three columns run the very same command; only what the caches hold differs:

- cold: an empty cache directory and a flushed redis-server: every signature planned, every
  kernel compiled, and both caches filled (the host profile's copy-bandwidth measurement is kept warm in all three columns, as
  a machine has it after its first process ever, so that the columns differ in planning and
  compiling only);
- warm disk: the directory a cold process filled: program entries and kernels from the disk;
- warm remote: an empty directory and a redis-server on loopback that a cold process on another
  "machine" (directory) filled: program entries and kernels from Redis (then written to disk).

Graph sets: the demo's graphs (tools/demo.stitch at the demo's sizes, T=256, B=2, S=128), and a
12-layer transformer: examples/transformer_block.stitch repeated as 12 graphs layer0..layer11
(B=2, S=128), as a model's 12 layers reach Stitch as 12 programs of one shape.

    BENCH_STITCH_BUILD=build/release python3 bench/cache/warm_start.py [--samples 5]
"""
import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("BENCH_STITCH_BUILD", os.path.join(ROOT, "build", "release"))
STITCH = os.path.join(BUILD, "tools", "stitch")
FIRST_RUN = re.compile(
    r"first run: ([0-9.e+-]+) ms \((\d+) kernels compiled, (\d+) loaded from the disk cache, "
    r"(\d+) from the remote cache; plan: ([^)]*)\)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    def __init__(self):
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--loglevel", "warning"], stdout=subprocess.DEVNULL)
        for _ in range(250):
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as c:
                    c.sendall(b"PING\r\n")
                    if c.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("redis-server did not start")

    def flush(self):
        with socket.create_connection(("127.0.0.1", self.port)) as c:
            c.sendall(b"FLUSHALL\r\n")
            c.recv(16)

    def url(self):
        return f"redis://127.0.0.1:{self.port}"

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def run(args, cache_dir, remote=None):
    env = dict(os.environ, STITCH_CACHE_DIR=cache_dir)
    env.pop("STITCH_REMOTE_CACHE", None)
    # Every process is a machine of one fleet: one key authenticates its entries on disk and in
    # Redis (README, "A fleet shares compiled kernels"); a process with another key (or none: its
    # user's own) would find the disk's entries foreign and rebuild them.
    if "STITCH_CACHE_KEY" not in env and "STITCH_CACHE_KEY_FILE" not in env:
        env["STITCH_CACHE_KEY"] = "warm-start benchmark fleet key, not a secret"
    if remote:
        env["STITCH_REMOTE_CACHE"] = remote
    t0 = time.perf_counter()
    out = subprocess.run([STITCH] + args, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"stitch {' '.join(args)} failed:\n{out.stdout}{out.stderr}")
    lines = FIRST_RUN.findall(out.stdout)
    return {
        "seconds": seconds,
        "first_ms": sum(float(m[0]) for m in lines),
        "compiled": sum(int(m[1]) for m in lines),
        "disk": sum(int(m[2]) for m in lines),
        "remote": sum(int(m[3]) for m in lines),
        "warm": sum(1 for m in lines if m[4].startswith("the program cache")),
        "graphs": len(lines),
    }


def profile_only(src, dst):
    """dst gets only the host profile entries of src (not kernels or programs)."""
    os.makedirs(dst, exist_ok=True)
    for name in os.listdir(src):
        path = os.path.join(src, name)
        with open(path, "rb") as f:
            head = f.read(4096)
        if b"host-profile" in head:
            shutil.copy(path, os.path.join(dst, name))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=5)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="stitch-warm-")
    with open(os.path.join(ROOT, "examples", "transformer_block.stitch")) as f:
        block = f.read()
    layers = os.path.join(work, "transformer_12_layers.stitch")
    with open(layers, "w") as f:
        for i in range(12):
            f.write(block.replace("graph transformer_block(", f"graph layer{i}("))
    sets = [
        ("demo graphs", ["run", os.path.join(ROOT, "tools", "demo.stitch"), "--backend",
                                    "cpu", "--dim", "T=256", "--dim", "B=2", "--dim", "S=128"]),
        ("12-layer transformer", ["run", layers, "--backend", "cpu", "--dim", "B=2",
                                              "--dim", "S=128"]),
    ]
    redis = Redis()
    try:
        # The machine's profile, measured once (kept in every column below).
        seed = os.path.join(work, "seed")
        run(sets[0][1], seed)
        print("| graphs | cold | warm disk | warm remote | cold / warm disk | "
              "cold / warm remote |")
        print("|---|---|---|---|---|---|")
        for label, args in sets:
            cols = {"cold": [], "disk": [], "remote": []}
            for k in range(a.samples):
                d = os.path.join(work, f"{len(label)}-{k}")
                profile_only(seed, d + "-cold")
                redis.flush()
                cols["cold"].append(run(args, d + "-cold", redis.url()))
                cols["disk"].append(run(args, d + "-cold"))
                profile_only(seed, d + "-remote")
                cols["remote"].append(run(args, d + "-remote", redis.url()))
            med = {c: statistics.median(r["seconds"] for r in v) for c, v in cols.items()}
            first = {c: statistics.median(r["first_ms"] for r in v) for c, v in cols.items()}

            def cell(c):
                r = cols[c][0]
                return (f"{med[c] * 1e3:.0f} ms ({first[c]:.0f} ms in first runs; "
                        f"{r['compiled']} compiled, {r['warm']}/{r['graphs']} warm)")

            print(f"| {label} ({cols['cold'][0]['graphs']} graphs) | {cell('cold')} | {cell('disk')} | {cell('remote')} | "
                  f"{med['cold'] / med['disk']:.1f}x | {med['cold'] / med['remote']:.1f}x |")
            for c in ("disk", "remote"):
                bad = [r for r in cols[c] if r["compiled"] or r["warm"] != r["graphs"]]
                if bad:
                    print(f"warning: {label} {c}: a warm process planned or compiled: {bad[0]}",
                          file=sys.stderr)
    finally:
        redis.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
