"""Long work says where it is: how far, how fast, how long still.

Pretraining, fine-tuning's training and prediction, and create_pretraining_data each write such
a line at least every `INTERVAL` seconds of wall time (and at each of their own milestones), so
a run is never minutes of silence. Standard library only: data_gen's main process uses it
before TensorFlow loads.
"""
import time

# Seconds of wall time between two progress lines, at most.
INTERVAL = 30.0


def duration(seconds: float) -> str:
  """'40 s', '12 min', '3.4 h', '2.1 days': a time left as a person reads it."""
  if seconds < 90:
    return f"{seconds:.0f} s"
  if seconds < 90 * 60:
    return f"{seconds / 60:.0f} min"
  if seconds < 48 * 3600:
    return f"{seconds / 3600:.1f} h"
  return f"{seconds / 86400:.1f} days"


def _amount(value: float) -> str:
  return f"{value:,}" if isinstance(value, int) else f"{value:,.1f}"


class Meter:
  """Work done out of `total` (None: unknown) over wall time: when a line is due, and the line.

  The rate is the recent one, over the work since the previous line: what the time left
  should extrapolate (a first call's tracing, or a slow start, drops out after one line).
  """

  def __init__(self, total: float | None, done: float = 0, interval: float = INTERVAL):
    self.total = total
    self.interval = interval
    self._done, self._time = done, time.monotonic()

  def due(self) -> bool:
    """Whether `interval` seconds have passed since the last line (or the start)."""
    return self.seconds_left() <= 0

  def seconds_left(self) -> float:
    """Seconds until the next line is due (negative: overdue)."""
    return self.interval - (time.monotonic() - self._time)

  def line(self, done: float, unit: str) -> str:
    """'1,200/10,000 steps, 3.41 steps/s, 44 min left' (no total: '1,200 steps, 3.41
    steps/s'); the next line is due `interval` seconds from now."""
    count = _amount(done) + ("" if self.total is None else f"/{_amount(self.total)}")
    return f"{count} {unit}, {self.rate(done, unit)}"

  def rate(self, done: float, unit: str) -> str:
    """'3.41 steps/s, 44 min left' (no total: '3.41 steps/s'), as `line` without the count."""
    now = time.monotonic()
    rate = (done - self._done) / max(now - self._time, 1e-9)
    self._done, self._time = done, now
    text = f"{rate:,.3g} {unit}/s"
    if self.total is not None and rate > 0:
      text += f", {duration(max(self.total - done, 0) / rate)} left"
    return text
