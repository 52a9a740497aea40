"""The fine-tuning tasks. Each is one module implementing `task.FineTuningTask`; the runner
and export find a run's task by the `kind` its task_config.json names, through this table."""
import importlib

# TaskConfig.kind -> the module and class that implement it (imported on first use).
TASKS = {
    "classification": ("bert_tf.tasks.classification", "ClassificationTask"),
    "squad": ("bert_tf.tasks.squad", "SquadTask"),
    "ner": ("bert_tf.tasks.ner", "NerTask"),
    "multiple_choice": ("bert_tf.tasks.multiple_choice", "MultipleChoiceTask"),
}


def task_class(kind: str, source: str = "task config"):
  """The FineTuningTask subclass of `kind`; ValueError naming `source` for an unknown one."""
  if kind not in TASKS:
    raise ValueError(f"{source}: unknown task {kind!r}; known: {', '.join(TASKS)}")
  module, name = TASKS[kind]
  return getattr(importlib.import_module(module), name)
