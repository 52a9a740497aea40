r"""The official SQuAD evaluation scripts' command line (evaluate-v1.1.py, evaluate-v2.0.py):
their positional arguments and flags, their JSON output; the scores are
`bert_tf.tasks.squad.scoring`'s.

  squad_evaluate dev-v1.1.json predictions.json
  squad_evaluate dev-v2.0.json predictions.json --na_prob_file null_odds.json

v2.0 when the data says "version": "v2.0", has `is_impossible` keys or unanswerable
questions, or when --na_prob_file is given; v1.1 otherwise. Bad input: one line naming the file
and question, exit status 2 (argparse's, as the official scripts).
"""
import argparse
import json
import sys

from bert_tf.tasks.squad import scoring as squad_eval


def _parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog="squad_evaluate",
      description="Official evaluation for SQuAD v1.1 and v2.0 (picked by the data).")
  parser.add_argument("data_file", metavar="DATA_JSON", help="Input data JSON file.")
  parser.add_argument("pred_file", metavar="PREDICTIONS_JSON", help="Model predictions.")
  # The official v2.0 script spells the flags with dashes; both spellings work.
  parser.add_argument("--na_prob_file", "--na-prob-file", "-n", metavar="NULL_ODDS_JSON",
                      help="Model estimates of probability of no answer (implies v2.0).")
  parser.add_argument("--na_prob_thresh", "--na-prob-thresh", "-t", type=float, default=1.0,
                      metavar="F",
                      help='Predict "" if no-answer probability exceeds this (default 1.0).')
  return parser


def main(argv: list[str] | None = None) -> int:
  """Prints the scores as the official script of the data's version does; 2 on bad input."""
  args = _parser().parse_args(argv)
  try:
    result, v2 = squad_eval.evaluate_files(args.data_file, args.pred_file, args.na_prob_file,
                                           args.na_prob_thresh)
  except ValueError as e:
    print(f"squad_evaluate: error: {' '.join(str(e).split())}", file=sys.stderr)
    return 2
  print(json.dumps(result, indent=2) if v2 else json.dumps(result))
  return 0


def run():
  """The `squad_evaluate` console script."""
  sys.exit(main())


if __name__ == "__main__":
  run()
