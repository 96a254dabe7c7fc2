"""Cumulus's driver of a parallel step (batch inference) on one node.

The node's agent writes this file into the job's folder and the step's
command runs it with the job's Python and the task's program_arguments.
It splits input_data into mini-batches (every node splits the same data
the same way), starts the step's worker processes, and asks the control
plane for mini-batches through the agent's local endpoint; each worker
imports the entry script, calls init() once and run(mini_batch) for every
mini-batch it is given: a list of file paths, or a pandas DataFrame of rows
for a table. A run that raises, returns fewer rows than it was given items,
or outlives retry_settings.timeout fails its mini-batch, which the control
plane hands out again up to retry_settings.max_retries. The rows the runs
return are kept by the control plane and appended to one file of the
append_row_to output when the step ends.

Only the standard library is needed, and pandas for tables.
"""

import hashlib
import importlib.util
import json
import logging
import os
import select
import subprocess
import sys
import time
import traceback
import urllib.error
import urllib.request

CONFIG = json.load(open(os.environ["CUMULUS_PARALLEL_CONFIG"]))
LOG = logging.getLogger("cumulus.parallel")
MAX_EXCHANGE = 8 << 20  # bytes of results sent in one exchange


def log(msg):
    print("[parallel] " + msg, flush=True)


# ---- splitting input_data into mini-batches ------------------------------

def parse_size(s):
    """mini_batch_size: (count, is_bytes)."""
    t = str(s).strip().lower().replace(" ", "")
    for suffix, mult in (("kb", 1 << 10), ("mb", 1 << 20), ("gb", 1 << 30), ("b", 1)):
        if t.endswith(suffix):
            return int(t[: -len(suffix)]) * mult, True
    return int(t), False


def list_files(root):
    if os.path.isfile(root):
        return [root]
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for f in sorted(filenames):
            out.append(os.path.join(dirpath, f))
    out.sort(key=lambda p: os.path.relpath(p, root))
    return out


def mltable_files(folder):
    """The data files and reader of an MLTable folder (its paths and
    read_delimited or read_parquet)."""
    spec_path = None
    for name in ("MLTable", "MLTABLE", "mltable"):
        if os.path.isfile(os.path.join(folder, name)):
            spec_path = os.path.join(folder, name)
    if spec_path is None:
        return None, None
    text = open(spec_path).read()
    try:
        import yaml  # PyYAML, when the environment has it

        spec = yaml.safe_load(text) or {}
    except ImportError:
        spec = mini_yaml(text)
    files = []
    for entry in spec.get("paths") or []:
        for kind in ("file", "folder", "pattern"):
            if kind in entry:
                p = os.path.normpath(os.path.join(folder, str(entry[kind])))
                if kind == "pattern":
                    import glob

                    files.extend(sorted(glob.glob(p, recursive=True)))
                elif kind == "folder":
                    files.extend(list_files(p))
                else:
                    files.append(p)
    reader = {"kind": "delimited", "delimiter": ",", "header": True}
    for t in spec.get("transformations") or []:
        if isinstance(t, dict) and "read_parquet" in t:
            reader = {"kind": "parquet"}
        elif isinstance(t, dict) and "read_delimited" in t:
            opts = t["read_delimited"] or {}
            reader["delimiter"] = opts.get("delimiter", ",")
            reader["header"] = str(opts.get("header", "all_files_same_headers")) != "no_header"
    return files, reader


def mini_yaml(text):
    """The subset of YAML an MLTable file uses, for environments without
    PyYAML: paths (a list of one-key maps) and transformations."""
    spec, key, item = {}, None, None
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        s = line.strip()
        if indent == 0 and s.endswith(":"):
            key = s[:-1]
            spec[key] = []
            continue
        if key is None:
            continue
        if s.startswith("- "):
            s = s[2:]
            item = {}
            spec[key].append(item)
            indent += 2
        k, _, v = s.partition(":")
        v = v.strip().strip('"').strip("'")
        if item is None:
            continue
        if v == "":
            item[k.strip()] = {}
            item["_open"] = k.strip()
        elif "_open" in item and indent > 2:
            item[item["_open"]][k.strip()] = v
        else:
            item[k.strip()] = v
    for items in spec.values():
        for it in items:
            it.pop("_open", None)
    return spec


def load_table():
    """The rows of input_data as one DataFrame, and where they came from."""
    try:
        import pandas as pd
    except ImportError:
        raise SystemExit("[parallel] input_data is a table (%s), and run() gets it as a pandas DataFrame: "
                         "the job's environment needs pandas" % CONFIG["inputType"])
    path = CONFIG["inputPath"]
    files, reader = (None, None)
    if os.path.isdir(path):
        files, reader = mltable_files(path)
    if files is None:
        files = list_files(path)
        reader = {"kind": "parquet"} if path.endswith(".parquet") else {"kind": "delimited", "delimiter": ",", "header": True}
    frames = []
    for f in files:
        if reader["kind"] == "parquet":
            frames.append(pd.read_parquet(f))
        else:
            frames.append(pd.read_csv(f, sep=reader["delimiter"], header=0 if reader["header"] else None))
    if not frames:
        return pd.DataFrame(), []
    return pd.concat(frames, ignore_index=True), files


def plan():
    """The mini-batches: each a list of file paths, or of row numbers of the
    table, with a name per item for the summary of failures."""
    size, is_bytes = parse_size(CONFIG["miniBatchSize"])
    if CONFIG["inputType"] in ("mltable", "uri_file"):
        table, files = load_table()
        batches = []
        keys = CONFIG.get("partitionKeys") or []
        if keys:
            for key, rows in sorted(table.groupby(keys, sort=True).indices.items(), key=lambda kv: str(kv[0])):
                key = key if isinstance(key, tuple) else (key,)
                batches.append({"rows": [int(r) for r in rows], "name": ", ".join("%s=%s" % kv for kv in zip(keys, key)),
                                "partition": {k: (v.item() if hasattr(v, "item") else v) for k, v in zip(keys, key)}})
        elif len(table):
            total = sum(os.path.getsize(f) for f in files) or 1
            per_row = max(total / len(table), 1)
            n = max(int(size / per_row), 1) if is_bytes else size
            for start in range(0, len(table), n):
                end = min(start + n, len(table))
                batches.append({"rows": list(range(start, end)), "name": "rows %d-%d" % (start, end - 1)})
        return batches, table
    root = CONFIG["inputPath"]
    files = list_files(root)
    batches, cur, cur_bytes = [], [], 0
    for f in files:
        cur.append(f)
        cur_bytes += os.path.getsize(f) if is_bytes else 1
        if cur_bytes >= size:
            batches.append({"files": cur})
            cur, cur_bytes = [], 0
    if cur:
        batches.append({"files": cur})
    return batches, None


def items_of(b):
    root = CONFIG["inputPath"]
    if "files" in b:
        return [os.path.relpath(f, root) if os.path.isdir(root) else os.path.basename(f) for f in b["files"]]
    return [b["name"]]


def count_of(b):
    """A mini-batch's items: files, rows, or one partition (run() returns
    what it makes of a partition, not a row per input row)."""
    if "files" in b:
        return len(b["files"])
    return 1 if "partition" in b else len(b["rows"])


class MiniBatchContext:
    """What run(mini_batch, mini_batch_context) gets besides the data."""

    def __init__(self, index, batch):
        self.minibatch_index = index
        self.partition_key_value = dict(batch.get("partition") or {})
        self.dataset = None


def digest_of(batches):
    h = hashlib.sha256()
    for b in batches:
        h.update(json.dumps(items_of(b) if "files" in b else b["rows"]).encode())
        h.update(b"\n")
    return h.hexdigest()[:16]


# ---- a worker process -----------------------------------------------------

def as_rows(result):
    """run()'s return as lines: one per element of a list, one per row of a
    DataFrame (its values separated by spaces)."""
    if result is None:
        return []
    if hasattr(result, "to_csv") and hasattr(result, "columns"):
        text = result.to_csv(sep=" ", header=False, index=False)
        return [line for line in text.splitlines()]
    if isinstance(result, (str, bytes)):
        return [result if isinstance(result, str) else result.decode()]
    return [str(x) for x in result]


def worker(task_fd, result_fd, args):
    tasks = os.fdopen(task_fd, "r")
    results = os.fdopen(result_fd, "w")
    logging.basicConfig(level=getattr(logging, CONFIG.get("logLevel", "INFO"), logging.INFO))
    script = CONFIG["entryScript"]
    sys.argv = [script] + args
    sys.path.insert(0, os.getcwd())
    spec = importlib.util.spec_from_file_location("entry_script", os.path.join(os.getcwd(), script))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if hasattr(module, "init"):
        module.init()
    import inspect

    try:
        params = [p for p in inspect.signature(module.run).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        with_context = len(params) >= 2
    except (TypeError, ValueError):
        with_context = False
    batches, table = None, None
    if CONFIG["inputType"] in ("mltable", "uri_file"):
        batches, table = plan()
    results.write(json.dumps({"ready": True}) + "\n")
    results.flush()
    for line in tasks:
        task = json.loads(line)
        out = {"index": task["index"]}
        try:
            if table is not None:
                b = batches[task["index"]]
                mini_batch = table.iloc[b["rows"]]
                n = count_of(b)
            else:
                b = {"files": task["files"]}
                mini_batch = task["files"]
                n = len(mini_batch)
            if with_context:
                rows = as_rows(module.run(mini_batch, MiniBatchContext(task["index"], b)))
            else:
                rows = as_rows(module.run(mini_batch))
            if len(rows) < n:
                out.update(ok=False, error="run() returned %d rows for %d items" % (len(rows), n))
            else:
                out.update(ok=True, rows=rows)
        except BaseException as e:  # noqa: BLE001 - the mini-batch fails, the worker goes on
            tb = traceback.format_exc()
            print(tb, file=sys.stderr, flush=True)
            out.update(ok=False, error="%s: %s" % (type(e).__name__, e))
        results.write(json.dumps(out) + "\n")
        results.flush()
    if hasattr(module, "shutdown"):
        module.shutdown()


# ---- the driver -------------------------------------------------------------

class Worker:
    def __init__(self, n, args):
        self.n = n
        task_r, self.task_w = os.pipe()
        self.result_r, result_w = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--cumulus-worker", str(task_r), str(result_w), "--"] + args,
            pass_fds=(task_r, result_w))
        os.close(task_r)
        os.close(result_w)
        self.tasks = os.fdopen(self.task_w, "w")
        self.buf = b""
        self.ready = False
        self.batch = None  # (index, started)

    def send(self, index, batch):
        task = {"index": index}
        if "files" in batch:
            task["files"] = batch["files"]
        self.tasks.write(json.dumps(task) + "\n")
        self.tasks.flush()
        self.batch = (index, time.monotonic())

    def lines(self):
        try:
            chunk = os.read(self.result_r, 1 << 20)
        except OSError:
            chunk = b""
        if not chunk:
            return None
        self.buf += chunk
        out = []
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            out.append(json.loads(line))
        return out

    def kill(self):
        try:
            self.proc.kill()
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001
            pass
        for f in (self.tasks,):
            try:
                f.close()
            except Exception:  # noqa: BLE001
                pass
        try:
            os.close(self.result_r)
        except OSError:
            pass


def exchange(body):
    req = urllib.request.Request(os.environ["CUMULUS_PARALLEL_ENDPOINT"], data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", "secret": os.environ["CUMULUS_PARALLEL_SECRET"]})
    delay = 0.5
    while True:
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                return json.load(resp)
        except urllib.error.HTTPError as e:
            if e.code < 500:
                raise SystemExit("[parallel] the control plane refused the step's exchange: %s %s" % (e.code, e.read().decode(errors="replace")))
            why = "%s %s" % (e.code, e.read().decode(errors="replace").strip())
        except (urllib.error.URLError, OSError) as e:
            why = str(e)
        log("the control plane could not be reached (%s); trying again" % why)
        time.sleep(delay)
        delay = min(delay * 2, 10)


def driver(args):
    timeout = CONFIG["timeout"] / 1e9
    nworkers = max(int(CONFIG["workers"]), 1)
    t0 = time.monotonic()
    batches, _ = plan()
    items = [count_of(b) for b in batches]
    log("%s split into %d mini-batches of %d items; %d worker processes on this node; %.2fs to plan"
        % (os.path.basename(CONFIG["inputPath"]) or CONFIG["input"], len(batches), sum(items), nworkers, time.monotonic() - t0))
    workers = [Worker(i, args) for i in range(nworkers)]
    queue = []  # (index, try) handed to this node, not yet running
    results = []
    plan_sent = False
    last_exchange, last_progress, starved_until, progress = 0.0, 0.0, 0.0, ""
    finished = failed = None
    while True:
        # Results and workers that ended.
        fds = {w.result_r: w for w in workers}
        ready, _, _ = select.select(list(fds), [], [], 0.2)
        for fd in ready:
            w = fds[fd]
            got = w.lines()
            if got is None:  # the worker died
                try:
                    code = w.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    code = None
                if w.batch is not None:
                    idx = w.batch[0]
                    results.append({"index": idx, "ok": False, "error": "the worker process exited with code %s" % code,
                                    "items": items_of(batches[idx])})
                elif not w.ready:
                    for x in workers:
                        x.kill()
                    raise SystemExit("[parallel] a worker process exited with code %s before init() returned: see the log above" % code)
                w.kill()
                workers[workers.index(w)] = Worker(w.n, args)
                continue
            for r in got:
                if r.get("ready"):
                    w.ready = True
                    continue
                if not r["ok"]:
                    r["items"] = items_of(batches[r["index"]])
                    log("mini-batch %d failed: %s" % (r["index"], r["error"]))
                results.append(r)
                w.batch = None
        now = time.monotonic()
        for i, w in enumerate(workers):
            if w.batch is not None and now - w.batch[1] > timeout:
                idx = w.batch[0]
                log("mini-batch %d ran longer than retry_settings.timeout (%gs); stopping its worker" % (idx, timeout))
                results.append({"index": idx, "ok": False, "error": "timed out after %gs" % timeout, "items": items_of(batches[idx])})
                w.kill()
                workers[i] = Worker(w.n, args)
        for w in workers:
            if w.ready and w.batch is None and queue:
                idx, _ = queue.pop(0)
                w.send(idx, batches[idx])
        running = [w.batch[0] for w in workers if w.batch is not None]
        if finished and not running and not queue and not results:
            break
        # Ask for as many mini-batches as keep every worker busy with one
        # more waiting, report results at once, and renew the leases of
        # what runs every few seconds.
        want = 0 if finished else max(2 * nworkers - len(running) - len(queue), 0)
        hungry = want > 0 and len(queue) < nworkers and now >= starved_until
        if not (results or hungry or now - last_exchange > 5):
            continue
        send, size = [], 0
        while results and size < MAX_EXCHANGE:
            r = results.pop(0)
            size += len(json.dumps(r))
            send.append(r)
        body = {"results": send, "running": running, "want": want, "progress": now - last_progress > 10}
        if not plan_sent:
            body["plan"] = {"items": items, "digest": digest_of(batches)}
        resp = exchange(body)
        plan_sent = True
        last_exchange = time.monotonic()
        got = resp.get("batches") or []
        for b in got:
            queue.append((b["index"], b["try"]))
        # Nothing to hand out now: the rest runs elsewhere; ask again in a
        # while (a lease may run out, a mini-batch may come back to retry).
        starved_until = last_exchange + 1 if want and not got else 0
        if resp.get("progress"):
            progress = resp["progress"]
            log(progress)
            last_progress = last_exchange
        if resp.get("failed"):
            failed = resp["failed"]
            break
        if resp.get("finished"):
            finished = True
    for w in workers:
        try:
            w.tasks.close()
        except Exception:  # noqa: BLE001
            pass
    deadline = time.monotonic() + 10
    for w in workers:
        try:
            w.proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            w.kill()
    if failed:
        log("the step failed: " + failed)
        sys.exit(1)
    log("done: " + progress)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--cumulus-worker":
        worker(int(sys.argv[2]), int(sys.argv[3]), sys.argv[5:])
    else:
        driver(sys.argv[1:])
