r"""The SQuAD splits of the fine-tuning benchmark (benchmarks/runs/squad.py and its peer
hf_squad_peer.py), cut from the dev sets on this machine (the official training sets are not
here), as SQuAD-format JSON files in --output_dir:

Kind: data both sides train on (benchmarks/, shared by runs/squad.py and
peers/hf_squad_peer.py).

  train-v1.1.json  the questions of dev-v1.1's first 32 articles (the first gold answer each:
                   training takes exactly one); --max_train_questions of them evenly
                   spaced over all 32 articles
  eval-v1.1.json   dev-v1.1's last 16 articles, every gold answer kept
  train-v2.0.json  the first 6 of the 8 articles in --v2_file (half of the official v2.0 dev),
                   the first gold answer each (none for an unanswerable question), capped alike
  eval-v2.0.json   its last 2 articles, every gold answer kept

The two halves share no article, so no context is seen in training and again in evaluation.
Plain Python (no TensorFlow, no torch): it runs in either venv.

  PYTHONPATH=. python3 benchmarks/squad_data.py --output_dir=/tmp/squad_bench [--recipe=squad_v1]

--max_train_questions is the recipe's (1500) unless given (0: all).

Prints the articles, paragraphs and questions (unanswerable ones) of each file.
"""
import argparse
import json
import os
from benchmarks import data_root  # $BERT_TF_DATA
from benchmarks import recipes  # --recipe: its max_train_questions
from benchmarks import scratch  # $BERT_TF_SCRATCH or the temporary folder

V1_TRAIN_ARTICLES = 32
V1_EVAL_ARTICLES = 16
V2_TRAIN_ARTICLES = 6
V2_EVAL_ARTICLES = 2


def load_articles(path: str, expected: int) -> tuple[str, list[dict]]:
  """(version, articles) of a SQuAD file; ValueError naming it if it has too few articles."""
  with open(path) as f:
    dataset = json.load(f)
  articles = dataset["data"]
  if len(articles) < expected:
    raise ValueError(f"{path}: {len(articles)} articles, the splits need {expected}")
  return dataset["version"], articles


def first_answer_only(articles: list[dict], max_questions: int) -> list[dict]:
  """The articles with each question's answers cut to the first (training takes one). With
  max_questions (0: all), only that many questions, evenly spaced over all of them (so every
  article still contributes); paragraphs left without a question are dropped."""
  total = sum(len(p["qas"]) for a in articles for p in a["paragraphs"])
  keep = min(max_questions or total, total)
  out, index = [], 0
  for article in articles:
    paragraphs = []
    for paragraph in article["paragraphs"]:
      qas = []
      for qa in paragraph["qas"]:
        # Question i is kept when floor(i * keep / total) steps up: exactly `keep` of them.
        if (index + 1) * keep // total > index * keep // total:
          qas.append({**qa, "answers": qa["answers"][:1]})
        index += 1
      if qas:
        paragraphs.append({**paragraph, "qas": qas})
    if paragraphs:
      out.append({**article, "paragraphs": paragraphs})
  return out


def write_split(output_dir: str, name: str, version: str, articles: list[dict]) -> None:
  """Writes {"version", "data"} to output_dir/name (under a temporary name first) and prints
  its counts."""
  path = os.path.join(output_dir, name)
  with open(path + ".tmp", "w") as f:
    json.dump({"version": version, "data": articles}, f)
  os.replace(path + ".tmp", path)
  qas = [qa for a in articles for p in a["paragraphs"] for qa in p["qas"]]
  print(f"{path}: {len(articles)} articles, {sum(len(a['paragraphs']) for a in articles)} "
        f"paragraphs, {len(qas)} questions ({sum(bool(qa.get('is_impossible')) for qa in qas)} "
        "unanswerable)")


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  v1 = data_root.path("squad", "v1.1", "dev-v1.1.json")
  v2 = data_root.path("squad", "v2.0", "dev-v2.0-articles-0-7.json")
  parser.add_argument("--v1_file", default=v1, required=v1 is None)
  parser.add_argument("--v2_file", default=v2, required=v2 is None)
  parser.add_argument("--output_dir", default=scratch.path("squad_bench"))
  parser.add_argument("--max_train_questions", type=int,
                      help="Keep N training questions of each version, evenly spaced (0: all; "
                      "default: the recipe's).")
  args = recipes.parse_args(parser, "squad_v1")
  os.makedirs(args.output_dir, exist_ok=True)

  version, articles = load_articles(args.v1_file, V1_TRAIN_ARTICLES + V1_EVAL_ARTICLES)
  write_split(args.output_dir, "train-v1.1.json", version,
              first_answer_only(articles[:V1_TRAIN_ARTICLES], args.max_train_questions))
  write_split(args.output_dir, "eval-v1.1.json", version, articles[-V1_EVAL_ARTICLES:])

  version, articles = load_articles(args.v2_file, V2_TRAIN_ARTICLES + V2_EVAL_ARTICLES)
  write_split(args.output_dir, "train-v2.0.json", version,
              first_answer_only(articles[:V2_TRAIN_ARTICLES], args.max_train_questions))
  write_split(args.output_dir, "eval-v2.0.json", version, articles[-V2_EVAL_ARTICLES:])


if __name__ == "__main__":
  main()
