"""The loop of a serving worker that a side-by-side driver times (peers/serving_compare.py):
requests as JSON lines on stdin, each answered with one JSON line on stdout.

Kind: shared by every kind (benchmarks/); imported, never run. Standard library only, so that
each side's worker imports nothing but its own serving stack (ours: tensorflow and
tensorflow_text; the peer's: torch and transformers).

A request: {"batches": [[{input name: text}, ...], ...], "outputs": bool}. Each batch is one
call of the worker's `predict`, timed alone (time.perf_counter around the call: the request
is already in memory, the answer is the call's return value, as a server's handler sees them).
The answer: {"seconds": [one per batch], "outputs": [predict's JSON-able answers] or absent}.
An empty line (or end of input) stops the loop.

`stage_p50_ms` is the round of a stage-by-stage table (peers/serving_stages.py, and the peer's
`--stages`), timed alike on both sides.
"""
import json
import statistics
import sys
import time
from typing import Callable


def serve(predict: Callable[[list[dict]], object], ready: dict) -> None:
  """Announces `ready` (what the worker is: versions, threads, the modules it imported), then
  answers requests until an empty line."""
  print(json.dumps(ready), flush=True)
  for line in sys.stdin:
    if not line.strip():
      return
    request = json.loads(line)
    seconds, outputs = [], []
    for batch in request["batches"]:
      start = time.perf_counter()
      answer = predict(batch)
      seconds.append(time.perf_counter() - start)
      outputs.append(answer)
    reply = {"seconds": seconds}
    if request.get("outputs"):
      reply["outputs"] = outputs
    print(json.dumps(reply), flush=True)


def stage_p50_ms(stages: dict[str, Callable[[int], object]], num_requests: int) -> dict:
  """{stage: p50 ms} of each stage(i) over requests 0..num_requests-1, the stages of one request
  one after another, each call timed alone (a stage-by-stage table's round; warm up first)."""
  seconds = {name: [] for name in stages}
  for i in range(num_requests):
    for name, stage in stages.items():
      start = time.perf_counter()
      stage(i)
      seconds[name].append(time.perf_counter() - start)
  return {name: round(statistics.median(s) * 1000, 3) for name, s in seconds.items()}
