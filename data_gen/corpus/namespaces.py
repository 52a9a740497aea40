"""The names under which a wiki's links show no text: its files, media and categories.

MediaWiki shows nothing in the running text for `[[File:x.jpg|thumb|A caption]]` (an image and
its caption, set apart), `[[Category:Cities]]` (listed at the page's foot) and, as this job
reads them, `[[Media:x.ogg]]`. Each wiki names these namespaces in its own language, accepts
aliases beside (German `Datei`, `Bild`, `Kategorie`; Chinese `文件`, `图像`, `分类`), and the
English canonical names everywhere. A dump's <siteinfo> lists its local names but no alias, and
a dump may carry another wiki's <siteinfo> (DBpedia's test dumps carry English Wikipedia's). So
a dump's links are hidden under the union of
  - the English names (the canonical ones, and English Wikipedia's alias `Image`),
  - the names its <siteinfo> gives namespaces -2, 6 and 14,
  - the table's names and aliases (namespaces.json: 111 wikis' siteinfo, made by
    benchmarks/make_namespace_table.py) for the run's language and for the language the
    dump's <siteinfo> names;
and a link to a file under any wiki's name for files and media is hidden too where its target
is a file's name (`is_file_link`: `[[Файл:Berlin.jpg|thumb|...]]` in Russian text behind an
English <siteinfo>). Only with the file's extension: some wikis' names are words a title may
start with in another (Romanian's `Imagine`, Dutch's `Medium`: `[[Imagine: John Lennon]]` is a
film), and a category's target has no such mark, so categories stay the run's languages'.
Names compare as MediaWiki compares them: case-insensitive, `_` a space, and in NFC, as
MediaWiki stores every title (`normalized`): a dump whose text is decomposed (NFD: the ậ of
Vietnamese `Tập tin` as an a and two combining marks) names its files as its NFC twin does. A
file link goes whole by its name alone (its options, `nhỏ|300px`, are never compared).

The standard library only: this runs in the workers.
"""
import functools
import json
import os
import re
import unicodedata

# The namespaces a link into shows no text, by key: their canonical names.
HIDDEN_NAMESPACES = {-2: "Media", 6: "File", 14: "Category"}
ENGLISH = frozenset({"media", "file", "image", "category"})
TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "namespaces.json")
# The extensions of the files a wiki shows (images, sound, video, documents, 3-D models).
FILE_NAME = re.compile(r"\.(?:jpe?g|png|gif|svg|tiff?|webp|xcf|ogg|oga|ogv|opus|webm|mp3|wav|"
                       r"flac|midi?|pdf|djvu|stl)$", re.IGNORECASE)


def normalized(name: str) -> str:
  """A namespace name as MediaWiki matches it: NFC, lower case, `_` and runs of spaces one
  space. (It runs for every link with a colon: an ASCII name, most of them, is its own NFC.)"""
  if not name.isascii():
    name = unicodedata.normalize("NFC", name)
  return " ".join(name.replace("_", " ").split()).lower()


@functools.cache
def _table() -> dict[str, dict[str, list[str]]]:
  with open(TABLE, encoding="utf-8") as f:
    return json.load(f)["wikis"]


def wiki_code(dbname: str | None) -> str | None:
  """The wiki's code in its dbname (dewiki -> de, zh_yuewiki -> zh-yue), or None."""
  if not dbname or not dbname.endswith("wiki") or len(dbname) <= 4:
    return None
  return dbname[:-4].replace("_", "-")


def in_table(*codes: str | None) -> bool:
  """Whether the table has a row for any of `codes` (languages or wiki codes)."""
  return any(code in _table() for code in codes)


def hidden_names(languages: tuple[str | None, ...], siteinfo_names=()) -> frozenset[str]:
  """The names (`normalized`) a dump's links to files, media and categories go by: English,
  `siteinfo_names` (its <siteinfo>'s for namespaces -2, 6, 14), and the table's for each of
  `languages` (languages or wiki codes; one without a row adds nothing)."""
  names = set(ENGLISH)
  names.update(map(normalized, siteinfo_names))
  for code in languages:
    for kind in _table().get(code, {}).values():
      names.update(map(normalized, kind))
  return frozenset(names)


@functools.cache
def _file_names_of_every_wiki() -> frozenset[str]:
  return frozenset(normalized(name) for kinds in _table().values()
                   for kind in (HIDDEN_NAMESPACES[-2], HIDDEN_NAMESPACES[6])
                   for name in kinds.get(kind, ()))


def is_file_link(prefix: str, target: str) -> bool:
  """Whether `[[prefix:target]]` links to a file under any wiki's name for files or media
  (`prefix` normalized), its target a file's name."""
  return prefix in _file_names_of_every_wiki() and FILE_NAME.search(target.rstrip()) is not None
