"""Settings as dataclasses that write and read JSON and refuse a key they do not know.

A misspelt key must not silently fall back to a default: `check_known_keys` names it and the
closest known one. `JsonConfig` gives a dataclass the round trip (`to_json`, `from_json`): the
data jobs write their settings into their stats files with it, for a tool or a later run to
read back.
"""
import dataclasses
import difflib
import json


def check_known_keys(values: dict, known, source: str | None = None) -> None:
  """ValueError naming the first key of `values` not in `known`, and the closest known one
  (after `source: `, if given)."""
  known = list(known)
  for key in values:
    if key not in known:
      close = difflib.get_close_matches(key, known, n=1)
      hint = f" (did you mean {close[0]!r}?)" if close else ""
      raise ValueError(f"{source + ': ' if source else ''}unknown key {key!r}{hint}")


class JsonConfig:
  """A dataclass's JSON: its fields by name, sorted; an unknown key refused on the way back."""

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)

  def to_json(self) -> str:
    return json.dumps(self.to_dict(), indent=2, sort_keys=True)

  @classmethod
  def from_dict(cls, values: dict, source: str | None = None):
    check_known_keys(values, [f.name for f in dataclasses.fields(cls)], source)
    return cls(**values)

  @classmethod
  def from_json(cls, text: str, source: str | None = None):
    return cls.from_dict(json.loads(text), source)
