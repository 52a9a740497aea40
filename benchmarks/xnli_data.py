r"""The zero-shot XNLI folder of the MNLI -> XNLI comparison (peers/glue_compare.py
--recipe=xnli_mnli writes it; runs/glue.py and peers/hf_glue_peer.py read it as --data_dir):
English MultiNLI pairs to train on, XNLI dev to evaluate on, in the per-language layout that
run_classifier --task_name=XNLI --xnli_language=all reads (premise, hypothesis, label; no
header):

  train-en.tsv     the pairs of --mnli_file (a JSON object of {"text_a", "text_b", "label"} by
                   numeric id: ../shared/data/mnli/mnli_1k.json), in the order of their ids
  dev-<lang>.tsv   every dev file of --xnli_dir (../shared/data/xnli: en, de, es, fr), copied

Kind: data both sides read (benchmarks/, shared by runs/ and peers/). Plain Python (no
TensorFlow, no torch): it runs in either venv.

  BERT_TF_DATA=../shared/data PYTHONPATH=. python3 benchmarks/xnli_data.py \
      --output_dir=/tmp/xnli_mnli

Prints the folder and its files' rows.
"""
import argparse
import glob
import json
import os
import shutil

from benchmarks import data_root  # $BERT_TF_DATA
from benchmarks import scratch  # $BERT_TF_SCRATCH or the temporary folder


def write_folder(output_dir: str, mnli_file: str, xnli_dir: str) -> str:
  """Writes train-en.tsv and the dev files into output_dir (made afresh); returns it. A pair
  whose text holds a tab or a line break is refused: the layout has no quoting."""
  with open(mnli_file, encoding="utf-8") as f:
    pairs = json.load(f)
  rows = []
  for key in sorted(pairs, key=int):
    pair = pairs[key]
    fields = (pair["text_a"], pair["text_b"], pair["label"])
    if any(c in field for field in fields for c in "\t\r\n"):
      raise ValueError(f"{mnli_file}: pair {key} holds a tab or a line break")
    rows.append("\t".join(fields) + "\n")
  dev_files = sorted(glob.glob(os.path.join(xnli_dir, "dev-*.tsv")))
  if not dev_files:
    raise ValueError(f"{xnli_dir}: no dev-<lang>.tsv")
  shutil.rmtree(output_dir, ignore_errors=True)
  os.makedirs(output_dir)
  with open(os.path.join(output_dir, "train-en.tsv"), "w", encoding="utf-8") as out:
    out.writelines(rows)
  for path in dev_files:
    shutil.copy(path, output_dir)
  return output_dir


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  mnli, xnli = data_root.path("mnli", "mnli_1k.json"), data_root.path("xnli")
  parser.add_argument("--mnli_file", default=mnli, required=mnli is None)
  parser.add_argument("--xnli_dir", default=xnli, required=xnli is None)
  parser.add_argument("--output_dir", default=scratch.path("xnli_mnli"))
  args = parser.parse_args()
  folder = write_folder(args.output_dir, args.mnli_file, args.xnli_dir)
  for name in sorted(os.listdir(folder)):
    with open(os.path.join(folder, name), encoding="utf-8") as f:
      print(f"{os.path.join(folder, name)}: {sum(1 for _ in f):,} rows")


if __name__ == "__main__":
  main()
