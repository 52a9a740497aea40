"""The GLUE metrics, in numpy: accuracy, F1, Matthews correlation, Pearson and Spearman.

Each takes 1-D arrays of equal length: integer label ids for the classification metrics (the
positive class of binary F1 is id 1, GLUE's "1"), floats for the correlations.
"""
import numpy as np


def accuracy(labels: np.ndarray, predictions: np.ndarray) -> float:
  return float(np.mean(np.asarray(labels) == np.asarray(predictions)))


def _confusion(labels, predictions, positive):
  labels, predictions = np.asarray(labels) == positive, np.asarray(predictions) == positive
  tp = float(np.sum(labels & predictions))
  fp = float(np.sum(~labels & predictions))
  fn = float(np.sum(labels & ~predictions))
  tn = float(np.sum(~labels & ~predictions))
  return tp, fp, fn, tn


def f1(labels: np.ndarray, predictions: np.ndarray, positive: int = 1) -> float:
  """F1 of the positive class; 0.0 when it is never predicted nor present."""
  tp, fp, fn, _ = _confusion(labels, predictions, positive)
  return 2 * tp / (2 * tp + fp + fn) if tp else 0.0


def macro_f1(labels: np.ndarray, predictions: np.ndarray) -> float:
  """The unweighted mean of each class's F1, over the classes present in either array."""
  classes = np.union1d(labels, predictions)
  return float(np.mean([f1(labels, predictions, c) for c in classes]))


def mcc(labels: np.ndarray, predictions: np.ndarray) -> float:
  """Matthews correlation of binary labels (CoLA's metric); 0.0 when undefined."""
  tp, fp, fn, tn = _confusion(labels, predictions, 1)
  denominator = np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
  return float((tp * tn - fp * fn) / denominator) if denominator else 0.0


def pearson(labels: np.ndarray, predictions: np.ndarray) -> float:
  x = np.asarray(labels, np.float64) - np.mean(labels)
  y = np.asarray(predictions, np.float64) - np.mean(predictions)
  denominator = np.sqrt(np.sum(x * x) * np.sum(y * y))
  return float(np.sum(x * y) / denominator) if denominator else 0.0


def _ranks(x: np.ndarray) -> np.ndarray:
  """1-based ranks, ties sharing the mean of their ranks (as Spearman's rho needs)."""
  x = np.asarray(x)
  order = np.argsort(x, kind="stable")
  sorted_x = x[order]
  # Start index of each run of equal values, and each run's mean rank.
  starts = np.flatnonzero(np.r_[True, sorted_x[1:] != sorted_x[:-1]])
  ends = np.r_[starts[1:], len(x)]
  mean_ranks = (starts + ends + 1) / 2.0
  ranks = np.empty(len(x))
  ranks[order] = np.repeat(mean_ranks, ends - starts)
  return ranks


def spearman(labels: np.ndarray, predictions: np.ndarray) -> float:
  return pearson(_ranks(labels), _ranks(predictions))


METRICS = {"accuracy": accuracy, "f1": f1, "macro_f1": macro_f1, "mcc": mcc,
           "pearson": pearson, "spearman": spearman}


def compute(names: tuple[str, ...], labels: np.ndarray, predictions: np.ndarray) -> dict:
  """{name: value} for each metric name in `names` (keys of `METRICS`)."""
  return {name: METRICS[name](labels, predictions) for name in names}
