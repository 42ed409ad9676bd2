"""The transcription bundle: an MCP server over stdio in plain Python 3 (the standard library only).

A mesh node launches it as a stdio child (a non-executable .py runs as `python3 <path>`). Its one tool,
`transcribe`, stands in for a speech-to-text engine: it "listens" for a while (`seconds`, default 0.3),
then answers the media's segments, made up from its name, so every media has its own words.

Each transcription appends one line to `$HOME/transcriptions.log` (`<media> <pid> <unix time>`): the
work a real engine would bill for. A test counts the lines to see how often it ran. HOME is one of the
few variables a mesh child gets (ADR 0204): the node's supervisor chooses it.

The mesh sends each call's idempotency key in the request's `_meta` (`tackle/idempotencyKey`), the
same key on a repeat. The module's results ledger answers most repeats before they reach this child;
the one it cannot is a repeat of a call whose node died while this child still ran it (the child, cut
off from its node, finishes the call). So the tool keeps its own record of results by key
(`$HOME/transcriptions.done`, under a lock): a key it has answered is answered again, not transcribed
again, and the repeat is noted in `$HOME/transcriptions.repeats`. Its listing says so
(`_meta: {"tackle/recovers": true}`), so a node that takes over the key of a dead node calls it, told
(`_meta["tackle/takeover"]`), as the call's recovery (ADR 0213); the lock makes a repeat wait for an
orphaned child still running the key. `$HOME/transcriptions.started` has a
line per transcription begun, so a test can kill the child while one runs.
"""
import fcntl
import json
import os
import sys
import time

WORDS = ["welcome", "back", "to", "the", "studio", "today", "we", "cut", "the", "interview", "short"]


def home(name):
    return os.path.join(os.environ.get("HOME", "."), name)


def keyed(key, run):
    """Runs `run` once per idempotency key: a key already answered gets its recorded answer."""
    if not key:
        return run()
    with open(home("transcriptions.lock"), "a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = home("transcriptions.done")
        if os.path.exists(done):
            with open(done, encoding="utf-8") as records:
                for line in records:
                    record = json.loads(line)
                    if record["key"] == key:
                        with open(home("transcriptions.repeats"), "a", encoding="utf-8") as repeats:
                            repeats.write(f"{record['value']['media']} {os.getpid()} {time.time():.3f}\n")
                        return record["result"]
        result = run()
        if not result.get("isError"):
            with open(done, "a", encoding="utf-8") as records:
                records.write(json.dumps({"key": key, "value": result["structuredContent"], "result": result}) + "\n")
        return result


def transcribe(arguments):
    media = str(arguments.get("media", ""))
    if not media:
        return {"isError": True, "content": [{"type": "text", "text": "invalid_input: media is required"}]}
    with open(home("transcriptions.started"), "a", encoding="utf-8") as started:
        started.write(f"{media} {os.getpid()} {time.time():.3f}\n")
    seconds = float(arguments.get("seconds", 0.3))
    time.sleep(max(0.0, min(seconds, 10.0)))
    stem = media.rsplit(".", 1)[0]
    seed = sum(ord(character) for character in stem)
    segments = []
    for index in range(int(arguments.get("segments", 3))):
        words = [WORDS[(seed + index * 3 + offset) % len(WORDS)] for offset in range(4)]
        segments.append({"startMs": 1000 + index * 2500, "durationMs": 2000,
                         "text": f"{' '.join(words)} ({stem} {index + 1})"})
    with open(home("transcriptions.log"), "a", encoding="utf-8") as log:
        log.write(f"{media} {os.getpid()} {time.time():.3f}\n")
    value = {"media": media, "language": "en", "segments": segments, "pid": os.getpid()}
    return {"content": [{"type": "text", "text": json.dumps(value)}], "structuredContent": value}


TOOLS = {
    "transcribe": (
        "Transcribe a media file: its speech as timed segments (startMs, durationMs, text)",
        {"type": "object", "properties": {
            "media": {"type": "string", "description": "The media file's key"},
            "segments": {"type": "integer", "minimum": 1, "maximum": 20},
            "seconds": {"type": "number", "minimum": 0, "maximum": 10},
        }, "required": ["media"]},
        transcribe,
    ),
}


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(message):
    request_id = message.get("id")
    method = message.get("method")
    if method == "initialize":
        version = message.get("params", {}).get("protocolVersion", "2025-06-18")
        return {"protocolVersion": version, "capabilities": {"tools": {}},
                "serverInfo": {"name": "transcribe", "version": "1.0.0"}}
    if method == "tools/list":
        # "tackle/recovers": on a takeover (`_meta["tackle/takeover"]`: the node that ran the key died
        # before recording it) this tool answers from its results by key, as it does on every call.
        return {"tools": [{"name": name, "description": entry[0], "inputSchema": entry[1],
                           "_meta": {"tackle/recovers": True}}
                          for name, entry in TOOLS.items()]}
    if method == "tools/call":
        params = message.get("params", {})
        entry = TOOLS.get(params.get("name"))
        if entry is None:
            return {"isError": True, "content": [{"type": "text", "text": f"no tool {params.get('name')}"}]}
        key = (params.get("_meta") or {}).get("tackle/idempotencyKey")
        return keyed(key, lambda: entry[2](params.get("arguments") or {}))
    if method == "ping":
        return {}
    raise LookupError(f"no method {method}")


for raw in sys.stdin:
    if not raw.strip():
        continue
    message = json.loads(raw)
    if message.get("id") is None:
        continue  # a notification (initialized, cancelled): nothing to answer
    try:
        send({"jsonrpc": "2.0", "id": message["id"], "result": answer(message)})
    except LookupError as error:
        send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": str(error)}})
