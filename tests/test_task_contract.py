"""Every built-in task holds to the task contract (task_contract.py): classification, SQuAD,
NER fine-tuned and feature-based (the paper's Table 7), multiple choice."""
import os

import pytest

from task_contract import Case, TaskContract
from toys import make_conll, make_squad, make_sst2, make_swag


def _sst2(folder: str) -> dict:
  make_sst2(folder, num_train=24, num_dev=10, num_test=4)
  return {"data_dir": folder}


def _squad(folder: str) -> dict:
  os.makedirs(folder)
  return {"train_file": make_squad(os.path.join(folder, "train.json"), v2=True),
          "predict_file": make_squad(os.path.join(folder, "dev.json"), v2=True)}


def _conll(folder: str) -> dict:
  make_conll(folder, {"train": 4, "dev": 3})
  return {"data_dir": folder}


def _swag(folder: str) -> dict:
  make_swag(folder, num_train=16, num_val=6, num_test=4)
  return {"data_dir": folder}


CASES = {
    "classification": Case("classification", {"task_name": "SST-2", "max_seq_length": 32},
                           _sst2),
    "squad": Case("squad", {"max_seq_length": 48, "max_query_length": 12, "doc_stride": 16,
                            "version_2_with_negative": True}, _squad),
    "ner": Case("ner", {"max_seq_length": 32}, _conll),
    # Its soft targets are the tagger's logits, as the fine-tuned tagger's: distilled as "ner"
    # (a teacher and a student with BiLSTMs would add ~30 s of tracing to every `make test`).
    "ner_feature_based": Case("ner", {"max_seq_length": 32, "feature_based": "sum_all",
                                      "lstm_units": 8}, _conll, distils_as="ner"),
    "multiple_choice": Case("multiple_choice", {"task_name": "swag", "max_seq_length": 24},
                            _swag),
}


class TestBuiltInTasks(TaskContract):

  @pytest.fixture(scope="class", params=sorted(CASES))
  def case(self, request) -> Case:
    return CASES[request.param]
