#!/usr/bin/env python3
"""Check that onnxruntime can load pairs of ONNX models.

Reads lines `<id>\t<original.onnx>\t<resaved.onnx>` from stdin and prints one
JSON line per id on stdout, in input order:

    {"id": ..., "original": "ok" | "error: <msg>", "resaved": "ok" | "error: <msg>"}

Each model is loaded with
`onnxruntime.InferenceSession(path, sess_options, providers=["CPUExecutionProvider"])`
(log_severity_level = 3). Every model is handled independently: Python
exceptions (bad path, protobuf parse error, unsupported IR/opset, missing
kernel, ...) become "error: <msg>". Loads happen in worker subprocesses, so a
native crash or a hang in ORT is also reported as an error ("error: crashed
..." / "error: timeout ...") and the worker is restarted.

An empty path or "-" skips that side and reports "skipped".

Options:
  --jobs N          worker processes (default: number of CPUs, at most 4)
  --timeout S       seconds allowed per model load (default 120)
  --opt-level L     graph optimisation level: all (ORT default), extended,
                    basic, disable (fastest; checks loading only). Default all.
"""
import argparse
import json
import os
import queue
import re
import subprocess
import sys
import threading

MAX_MSG = 300
_SELF = os.path.abspath(__file__)


def _strip_src_locations(msg: str) -> str:
    """Drop ORT's `/onnxruntime_src/file.cc:123 ns::Func(args...) ` prefixes."""
    out = []
    i = 0
    while True:
        j = msg.find("/onnxruntime_src/", i)
        if j < 0:
            out.append(msg[i:])
            break
        out.append(msg[i:j])
        sp = msg.find(" ", j)
        if sp < 0:
            break
        k = sp + 1
        # skip a function signature with balanced parentheses, if present
        m = re.match(r"[^\s(]*\(", msg[k:])
        if m:
            depth, t = 0, k + m.end() - 1
            while t < len(msg):
                if msg[t] == "(":
                    depth += 1
                elif msg[t] == ")":
                    depth -= 1
                    if depth == 0:
                        break
                t += 1
            k = t + 1
            # trailing qualifiers such as " const"
            while msg.startswith(" const", k):
                k += len(" const")
        i = k
    return "".join(out)


def _short(e: BaseException, path: str = "") -> str:
    msg = " ".join(str(e).split()) or type(e).__name__
    msg = _strip_src_locations(msg)
    if path:
        msg = msg.replace(f"Load model from {path} failed:", "load failed: ")
    msg = " ".join(msg.split())
    if len(msg) > MAX_MSG:
        msg = msg[:MAX_MSG] + "..."
    return msg


# --------------------------------------------------------------------------
# worker: reads one path per line on stdin, answers one status line per path


def worker(opt_level: str) -> int:
    import onnxruntime as ort

    try:
        ort.set_default_logger_severity(3)
    except Exception:
        pass
    levels = {
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    }
    level = levels[opt_level]
    out = sys.stdout
    for raw in sys.stdin:
        path = raw.rstrip("\r\n")
        try:
            so = ort.SessionOptions()
            so.log_severity_level = 3
            so.intra_op_num_threads = 1
            so.inter_op_num_threads = 1
            so.graph_optimization_level = level
            sess = ort.InferenceSession(path, sess_options=so, providers=["CPUExecutionProvider"])
            del sess
            res = "ok"
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # noqa: BLE001 - robustness is the point
            res = "error: " + _short(e, path)
        out.write(json.dumps(res) + "\n")
        out.flush()
    return 0


# --------------------------------------------------------------------------
# parent


class Worker:
    def __init__(self, opt_level: str):
        self.opt_level = opt_level
        self.proc = None

    def _start(self):
        self.proc = subprocess.Popen(
            [sys.executable, _SELF, "--worker", "--opt-level", self.opt_level],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )

    def load(self, path: str, timeout: float) -> str:
        if "\n" in path or "\r" in path:
            return "error: path contains a newline"
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        proc = self.proc
        timed_out = threading.Event()

        def _kill():
            timed_out.set()
            proc.kill()

        timer = threading.Timer(timeout, _kill)
        timer.start()
        try:
            proc.stdin.write(path + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        finally:
            timer.cancel()
        if line:
            try:
                return json.loads(line)
            except ValueError:
                return "error: bad worker reply " + line.strip()[:100]
        # worker died
        try:
            proc.kill()
        except OSError:
            pass
        rc = proc.wait()
        self.proc = None
        if timed_out.is_set():
            return f"error: timeout after {timeout:g}s"
        return f"error: crashed (worker exit code {rc})"

    def close(self):
        if self.proc is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except Exception:
                self.proc.kill()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1))
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--opt-level", choices=["all", "extended", "basic", "disable"], default="all")
    args = ap.parse_args()
    if args.worker:
        return worker(args.opt_level)

    records = []  # [id, original, resaved]
    for raw in sys.stdin:
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        parts = line.split("\t")
        records.append([parts[0], parts[1] if len(parts) > 1 else "", parts[2] if len(parts) > 2 else ""])

    n = len(records)
    results = [dict() for _ in range(n)]
    done = [threading.Event() for _ in range(n)]
    jobs = queue.Queue()
    for i, (_, orig, res) in enumerate(records):
        jobs.put((i, "original", orig))
        jobs.put((i, "resaved", res))
    lock = threading.Lock()

    def run(w: Worker):
        while True:
            try:
                i, side, path = jobs.get_nowait()
            except queue.Empty:
                break
            status = "skipped" if (not path or path == "-") else w.load(path, args.timeout)
            with lock:
                results[i][side] = status
                if len(results[i]) == 2:
                    done[i].set()
        w.close()

    workers = [Worker(args.opt_level) for _ in range(max(1, args.jobs))]
    threads = [threading.Thread(target=run, args=(w,), daemon=True) for w in workers]
    for t in threads:
        t.start()
    out = sys.stdout
    for i, rec in enumerate(records):
        done[i].wait()
        r = results[i]
        out.write(json.dumps({"id": rec[0], "original": r["original"], "resaved": r["resaved"]}) + "\n")
        out.flush()
    for t in threads:
        t.join()
    return 0


if __name__ == "__main__":
    sys.exit(main())
