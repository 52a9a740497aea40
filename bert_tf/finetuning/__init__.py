"""The fine-tuning framework: what every task implements and everything that runs one. It names
no task; the tasks (`bert_tf.tasks`) stand on it.

  task.py        FineTuningTask and TaskConfig: the interface a task implements
  runner.py      the one runner: records, train / resume, the lr x restarts sweep, evaluate,
                 predict, results files, load_trained() for export
  inputs.py      the original's packing of token ids, in numpy and in a serving graph
  windows.py     what windowing serving graphs share (the max-context rule, chunked calls)
  text_files.py  the one reader of every task's files
  losses.py, metrics.py   softmax cross-entropy and accuracy; GLUE metrics

And here, the registry: the runner, export and the scripts find a task only through these calls:

  register(cls)                  a task class under `cls.config_class.kind` (a decorator); a
                                 task defined anywhere, a test's toy task too, registers so
  task_class(kind)               the class registered as `kind`
  build(kind, settings, **inputs)
                                 a task to run: its config from `settings` (the config's
                                 fields; what the data decides is read from `inputs`)

The built-in tasks register when their module is imported; `BUILT_IN` names that module for
each (a string: the framework imports no task), so that only the task a run needs is imported.
A new task is a module or folder under `bert_tf/tasks/` (or anywhere: a test's toy task) that
imports this framework; a built-in one also gets its line in `BUILT_IN`.
"""
import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # A task module imports this one: the registry itself loads no TensorFlow.
  from bert_tf.finetuning.task import FineTuningTask

# kind -> the module whose import registers it.
BUILT_IN = {
    "classification": "bert_tf.tasks.classification.task",
    "squad": "bert_tf.tasks.squad.task",
    "ner": "bert_tf.tasks.ner.task",
    "multiple_choice": "bert_tf.tasks.multiple_choice",
}
_REGISTERED: dict[str, "type[FineTuningTask]"] = {}


def register(cls: "type[FineTuningTask]") -> "type[FineTuningTask]":
  """Registers a FineTuningTask subclass under its config's kind; returns it (a decorator).
  ValueError for a config without a kind, or a kind another class holds."""
  kind = cls.config_class.kind
  if not kind:
    raise ValueError(f"{cls.__qualname__}: its config_class ({cls.config_class.__qualname__}) "
                     "sets no kind")
  held = _REGISTERED.get(kind)
  if held is not None and _qualified(held) != _qualified(cls):
    raise ValueError(f"task {kind!r} is {_qualified(held)} already, not {_qualified(cls)}")
  _REGISTERED[kind] = cls
  return cls


def _qualified(cls: type) -> str:
  return f"{cls.__module__}.{cls.__qualname__}"


def kinds() -> list[str]:
  """The names of the known tasks: the built-in ones and those registered."""
  return sorted(set(BUILT_IN) | set(_REGISTERED))


def task_class(kind: str, source: str = "task config") -> "type[FineTuningTask]":
  """The FineTuningTask subclass registered as `kind`; ValueError naming `source` for an
  unknown one."""
  if kind not in _REGISTERED and kind in BUILT_IN:
    importlib.import_module(BUILT_IN[kind])
  if kind not in _REGISTERED:
    raise ValueError(f"{source}: unknown task {kind!r}; known: {', '.join(kinds())}")
  return _REGISTERED[kind]


def build(kind: str, settings: dict | None = None, **inputs) -> "FineTuningTask":
  """The task `kind` to run (`FineTuningTask.from_data`): `settings` are its config's fields
  (the run_* scripts' flags of those names; omitted ones take their defaults), `inputs` where
  its data is (`FineTuningTask.input_args`: a data_dir, SQuAD's train_file...)."""
  return task_class(kind).from_data(settings or {}, **inputs)
