"""The built-in fine-tuning tasks, one module or folder per task, each standing on
`bert_tf.finetuning` (the interface, the runner and what tasks share) and on nothing of another
task:

  classification/   GLUE, XNLI and the user's TSV/CSV sentence (pair) classification
                    (task.py; glue.py: the datasets' files and label sets)
  squad/            SQuAD v1.1 / v2.0 (task.py; serving.py: question + context -> answer in the
                    graph; scoring.py: the official scores, no TensorFlow)
  ner/              CoNLL-2003 NER, fine-tuned and feature-based (task.py; serving.py: raw text
                    -> entities in the graph)
  multiple_choice.py  SWAG and any N-ending choice, one file

and a job that is no fine-tuning task: feature_extraction.py (extract_features).

A task registers under its config's kind when its module is imported; `bert_tf.finetuning.
BUILT_IN` says which module that is for each built-in task, so a run imports only its own.
"""
