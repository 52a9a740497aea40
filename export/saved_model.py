"""A fine-tuning run's model as a self-contained SavedModel for TF Serving, whatever the task.

    export_from_output_dir("mrpc", "mrpc_serving")   # -> mrpc_serving/<next version>/

reads the run's task_config.json, builds the task's model, restores its checkpoint, and saves
the task's serving module (`FineTuningTask.serving_module`: signatures on raw text that answer
in the task's terms) in TF Serving's layout with warm-up requests (`export.tf_serving`). A
process that imports only tensorflow and tensorflow_text loads and runs the result.
"""
from bert_tf.finetuning import runner
from export import tf_serving


def export_from_output_dir(model_dir: str, export_dir: str, data: str | None = None,
                           checkpoint: str | None = None, model_name: str = "bert") -> str:
  """Exports a run_* output_dir's model (its latest checkpoint, or `checkpoint`) to
  export_dir/<version>, with warm-up requests from the first eval examples of `data` (the
  task's data: run_classifier's data_dir, run_squad's predict_file), else the task's samples.
  Returns the path."""
  task, model, tokenizer = runner.load_trained(model_dir, checkpoint, data)
  examples = task.read_examples(task.splits("eval")[0]) if data else None
  return tf_serving.export(task.serving_module(model, tokenizer), export_dir,
                           task.warmup_inputs(examples), model_name)
