r"""Does the demo's pretraining pay? `make demo`'s small BERT fine-tuned from its pretraining and
from scratch, seed by seed.

Kind: a run of our product (benchmarks/runs/); no peer.

Runs the demo's stages 1-4 once (demo.pretrain_small_bert: the topic task, the corpus without
the task's dev sentences, vocab, records, pretraining), then for each seed the demo's fine-tuning
of the small BERT twice, from the pretraining and from random weights (demo.fine_tune_small: the
same recipe, the seed deciding initialization, dropout and batch order). Prints one line a seed
and the means: dev accuracy (the largest topic's share: ~0.30) pretrained, from scratch, and the
difference.

  TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH=. nice .venv/bin/python benchmarks/runs/demo_pretraining.py \
      --output_dir=/tmp/bench_demo --seeds=12345,1,2
"""
import os
import shutil
import statistics
import sys

from absl import app
from absl import flags

# The script's folder (first on the path) holds benchmarks/runs/data_gen.py: put the
# repository (demo.py, the data_gen package) before it.
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
import demo  # pylint: disable=g-import-not-at-top,wrong-import-position

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "Folder for the demo's stages and the fine-tuning runs "
                    "(started afresh).", required=True)
flags.DEFINE_list("seeds", ["12345", "1", "2"], "Fine-tuning seeds (12345: the demo's).")


def main(_):
  out = os.path.abspath(FLAGS.output_dir)
  shutil.rmtree(out, ignore_errors=True)
  os.makedirs(out)
  paths = demo.pretrain_small_bert(out)
  rows = []
  for seed in map(int, FLAGS.seeds):
    pretrained = demo.fine_tune_small(paths, os.path.join(out, f"pretrained_{seed}"), True, seed)
    scratch = demo.fine_tune_small(paths, os.path.join(out, f"scratch_{seed}"), False, seed)
    rows.append((seed, pretrained, scratch))
  print("\nseed  pretrained  from scratch  difference")
  for seed, pretrained, scratch in rows:
    print(f"{seed:>5}  {pretrained:10.1%}  {scratch:12.1%}  {pretrained - scratch:+10.1%}")
  means = [statistics.mean(column) for column in list(zip(*rows))[1:]]
  print(f"{'mean':>5}  {means[0]:10.1%}  {means[1]:12.1%}  {means[0] - means[1]:+10.1%}")


if __name__ == "__main__":
  app.run(main)
