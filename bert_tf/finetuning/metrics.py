"""The GLUE metrics: accuracy, F1, Matthews correlation (scikit-learn), Pearson and Spearman
(scipy).

Each takes 1-D arrays of equal length: integer label ids for the classification metrics (the
positive class of binary F1 is id 1, GLUE's "1"), floats for the correlations. Where a metric
is undefined (no positive class anywhere, a constant prediction), it is 0.0, not NaN: an
early, constant model scores 0.
"""
import numpy as np
from scipy import stats
from sklearn import metrics


def accuracy(labels: np.ndarray, predictions: np.ndarray) -> float:
  return float(metrics.accuracy_score(labels, predictions))


def f1(labels: np.ndarray, predictions: np.ndarray) -> float:
  """F1 of the positive class, id 1."""
  return float(metrics.f1_score(labels, predictions, labels=[1], average="macro",
                                zero_division=0.0))


def macro_f1(labels: np.ndarray, predictions: np.ndarray) -> float:
  """The unweighted mean of each class's F1, over the classes present in either array."""
  return float(metrics.f1_score(labels, predictions, average="macro", zero_division=0.0))


def mcc(labels: np.ndarray, predictions: np.ndarray) -> float:
  """Matthews correlation (CoLA's metric)."""
  return float(metrics.matthews_corrcoef(labels, predictions))


def _correlation(statistic, labels: np.ndarray, predictions: np.ndarray) -> float:
  if np.ptp(labels) == 0 or np.ptp(predictions) == 0:
    return 0.0
  return float(statistic(labels, predictions)[0])


def pearson(labels: np.ndarray, predictions: np.ndarray) -> float:
  return _correlation(stats.pearsonr, labels, predictions)


def spearman(labels: np.ndarray, predictions: np.ndarray) -> float:
  return _correlation(stats.spearmanr, labels, predictions)


METRICS = {"accuracy": accuracy, "f1": f1, "macro_f1": macro_f1, "mcc": mcc,
           "pearson": pearson, "spearman": spearman}


def compute(names: tuple[str, ...], labels: np.ndarray, predictions: np.ndarray) -> dict:
  """{name: value} for each metric name in `names` (keys of `METRICS`)."""
  return {name: METRICS[name](labels, predictions) for name in names}


def compute_by_group(names: tuple[str, ...], labels: np.ndarray, predictions: np.ndarray,
                     groups: np.ndarray) -> dict:
  """Each metric per group (`accuracy_de` for group "de": XNLI's languages) and, under its own
  name, its mean over the groups: each language counts alike, whatever its size."""
  per_group = {group: compute(names, labels[groups == group], predictions[groups == group])
               for group in sorted(set(groups))}
  results = {name: float(np.mean([m[name] for m in per_group.values()])) for name in names}
  for group, group_results in per_group.items():
    results.update({f"{name}_{group}": value for name, value in group_results.items()})
  return results
