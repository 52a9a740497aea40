"""Several languages in one job: `--input_file=en:corpus/en/*,de:corpus/de/*` and the smoothing
of their shares (`--language_smoothing`), which create_pretraining_data and build_vocab share.

google-research/bert's multilingual.md: each language's share P(L) of the corpus, exponentiated
by S and renormalized, so that with S=0.7 a corpus with 1000x more English than Icelandic is
sampled ~126x more English (1000^0.7), not 1000x. High-resource languages are sub-sampled,
low-resource ones repeated; the total stays the corpus's.

What a share counts is the caller's (both jobs count sentences: see their modules); this module
only does the arithmetic and the parsing. The standard library and langcodes (IANA's registry
of language tags) only: it runs before TensorFlow loads.
"""
import dataclasses
import re

# Wikipedia's language codes that are not BCP 47 tags (the subdomain of their wikis, the prefix
# of their dumps' names), as a user reading those dumps would write them.
WIKIPEDIA_CODES = frozenset({"simple", "zh-classical", "zh-min-nan", "roa-rup", "bat-smg",
                             "fiu-vro", "map-bms", "roa-tara", "cbk-zam", "be-x-old"})
# "lang:glob": a prefix of letters, digits, "-" and "_" before a colon that does not start a
# URL (gs://...).
_PREFIX = re.compile(r"^([A-Za-z0-9_-]+):(?!//)(.*)$")


@dataclasses.dataclass(frozen=True)
class LanguageInput:
  """One language's glob (a plain --input_file's comma-separated globs: language None)."""
  language: str | None
  patterns: str


def parse_inputs(spec: str, flag: str = "--input_file") -> list[LanguageInput]:
  """`spec` split by language: [LanguageInput(None, spec)] when no entry has a language prefix
  (the original's --input_file, unchanged), else one per entry, in order.

  Raises ValueError naming the entry: a prefix that is not a language code, entries with and
  without a language, the same language twice (a copied entry whose prefix was left, as
  en:corpus/en/*,en:corpus/de/*, would mix a language into another; en and EN are one).
  """
  entries = [e.strip() for e in spec.split(",") if e.strip()]
  parsed = [_PREFIX.match(e) for e in entries]
  if not any(parsed):
    return [LanguageInput(None, spec)]
  # Imported here: its registry costs 70 ms, and the spawned workers import this module
  # (through the job's config) without parsing anything.
  import langcodes  # pylint: disable=g-import-not-at-top
  inputs, given = [], {}  # a language (its standard tag) -> its entry
  for entry, match in zip(entries, parsed):
    if not match:
      raise ValueError(f"{flag}: {entry!r} has no language prefix while others have one: give "
                       "every entry one (en:corpus/en/*) or none")
    language, pattern = match.groups()
    if language not in WIKIPEDIA_CODES and not langcodes.tag_is_valid(language):
      raise ValueError(f"{flag}: {language!r} (in {entry!r}) is not a language code (BCP 47, "
                       "as en, de, zh-Hans, or Wikipedia's, as simple); a file name with a "
                       f"colon: write it ./{entry}")
    key = language if language in WIKIPEDIA_CODES else langcodes.standardize_tag(language)
    if key in given:
      raise ValueError(f"{flag}: language {language!r} given twice (as {given[key]!r} "
                       "too): one glob a language, e.g. en:corpus/en/*")
    given[key] = entry
    inputs.append(LanguageInput(language, pattern))
  return inputs


def check_smoothing(smoothing: float, flag: str = "--language_smoothing") -> None:
  """Raises ValueError unless 0 < smoothing <= 1 (1: the corpus's own shares; towards 0: every
  language alike)."""
  if not 0 < smoothing <= 1:
    raise ValueError(f"{flag}={smoothing}: must be in (0, 1] (1 keeps the corpus's shares; "
                     "multilingual BERT used 0.7)")


def check_smoothing_has_languages(inputs: list[LanguageInput], smoothing: float,
                                  flag: str = "--language_smoothing") -> None:
  """Raises ValueError when `smoothing` is not 1 and `inputs` (`parse_inputs`'s) name no
  language: there are no shares to smooth, and a user who forgot the prefixes would get the
  corpus unsmoothed without a word."""
  if smoothing != 1 and inputs[0].language is None:
    raise ValueError(f"{flag}={smoothing} smooths the languages' shares, and --input_file "
                     "names no language: prefix each glob with its language "
                     "(en:corpus/en/*,de:corpus/de/*), or leave the flag out")


def smoothed_shares(sizes: dict[str, float], smoothing: float) -> dict[str, dict[str, float]]:
  """Per language: raw_share P(L) = its size over the total; sampled_share P(L)^S renormalized;
  rate, sampled_share / raw_share: how many times each unit of its data is used (below 1:
  sub-sampled, above: repeated), so that the total stays the corpus's.

  A language of size 0 gets shares 0 and rate 0 (nothing to sample).
  """
  check_smoothing(smoothing)
  total = sum(sizes.values())
  if total <= 0:
    raise ValueError("no data in any language")
  raw = {language: size / total for language, size in sizes.items()}
  powered = {language: share ** smoothing if share else 0.0 for language, share in raw.items()}
  norm = sum(powered.values())
  return {language: {"raw_share": raw[language], "sampled_share": powered[language] / norm,
                     "rate": powered[language] / norm / raw[language] if raw[language] else 0.0}
          for language in sizes}
