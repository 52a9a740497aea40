"""prepare_corpus on any language's Wikipedia dump: files, media and categories hidden under every
name the wiki accepts (its <siteinfo>'s, English, the namespace table's aliases), interlanguage
links dropped in any language, --language against the dump's <siteinfo>, a language the table
has no row for, right-to-left and mixed-script text. Each dump is made here, tiny, its pages'
wikitext written in the style of the real articles (the issue's examples among them)."""
import bz2
import logging
import os
from xml.sax import saxutils

import pytest

from data_gen.corpus import namespaces
from data_gen.corpus import pipeline
from data_gen.corpus import sources
from data_gen.corpus import units
from data_gen.corpus import wikitext
from data_gen.corpus.config import CorpusConfig
from tests.entry_points import run_cases

ENGLISH_SITEINFO = ("en", "enwiki", {-2: "Media", 6: "File", 14: "Category"})
GERMAN_SITEINFO = ("de", "dewiki", {-2: "Medium", 6: "Datei", 14: "Kategorie"})
# Chinese Wikipedia's local names are the English ones; 文件, 图像, 分类 are its aliases.
CHINESE_SITEINFO = ("zh", "zhwiki", {-2: "Media", 6: "File", 14: "Category"})

BERLIN = ("[[Datei:Berlin Skyline.jpg|mini|links|Die Skyline von [[Berlin]] im Sommer]]\n"
          "'''Berlin''' ist die [[Hauptstadt]] der [[Deutschland|Bundesrepublik Deutschland]]."
          "\n[[Bild:Brandenburger Tor.png|thumb|Das Tor]]\n"
          "Die Stadt ist ein [[Land (Deutschland)|Land]].[[File:Wappen.svg|20px]]"
          "[[Medium:Hymne.ogg]]\n"
          "Das Wort [[wikt:de:Hauptstadt|Hauptstadt]] und die [[:Kategorie:Berlin|Kategorie]]."
          "\n[[Kategorie:Berlin|Stadt in Deutschland]]\n[[Category:Capitals]]\n[[en:Berlin]]"
          "\n[[zh-yue:柏林]]")
BERLIN_TEXT = ["Berlin ist die Hauptstadt der Bundesrepublik Deutschland.",
               "Die Stadt ist ein Land.",
               "Das Wort Hauptstadt und die Kategorie."]
BEIJING = ("[[文件:Beijing skyline.jpg|缩略图|北京的天际线]]\n"
           "'''北京市'''是[[中华人民共和国]]的首都。[[图像:Tiananmen.jpg|右|天安门]]北京有两千多年的历史。"
           "\n[[分类:首都]]\n[[Category:北京]]\n[[de:Peking]]\n[[ja:北京市]]")
BEIJING_TEXT = ["北京市是中华人民共和国的首都。北京有两千多年的历史。"]


def _dump(folder, name, siteinfo, pages, compress=False) -> str:
  """A dump of `pages` ((id, title, wikitext)) behind `siteinfo` (language, dbname, {key:
  name}), as Wikimedia writes one."""
  language, dbname, names = siteinfo
  spaces = "".join(f'      <namespace key="{key}" case="first-letter">{saxutils.escape(n)}'
                   "</namespace>\n" for key, n in sorted(names.items()))
  xml = ('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" '
         f'xml:lang="{language}">\n  <siteinfo>\n    <dbname>{dbname}</dbname>\n'
         f"    <namespaces>\n{spaces}    </namespaces>\n  </siteinfo>\n")
  for page_id, title, text in pages:
    xml += (f"  <page>\n    <title>{saxutils.escape(title)}</title>\n    <ns>0</ns>\n"
            f"    <id>{page_id}</id>\n    <revision>\n      <text>{saxutils.escape(text)}"
            "</text>\n    </revision>\n  </page>\n")
  data = (xml + "</mediawiki>\n").encode("utf-8")
  path = os.path.join(folder, name + (".xml.bz2" if compress else ".xml"))
  with open(path, "wb") as f:
    f.write(bz2.compress(data) if compress else data)
  return path


def _multistream(folder, siteinfo, pages) -> str:
  """`_dump`'s dump as a multistream one: its header (the siteinfo) a bz2 stream of its own,
  which no worker reads, then a stream of the pages; and its index."""
  with open(_dump(folder, "plain", siteinfo, pages), "rb") as f:
    xml = f.read()
  start = xml.index(b"  <page>")
  streams = [bz2.compress(xml[:start]), bz2.compress(xml[start:])]
  path = os.path.join(folder, "dewiki-multistream.xml.bz2")
  with open(path, "wb") as f:
    f.write(b"".join(streams))
  with open(os.path.join(folder, "dewiki-multistream-index.txt.bz2"), "wb") as f:
    f.write(bz2.compress("".join(f"{len(streams[0])}:{page[0]}:{page[1]}\n"
                                 for page in pages).encode()))
  return path


def _clean(paths, language=None) -> tuple[list[list[str]], pipeline.Wikis]:
  """Each page's sentences as the job's workers make them (in this process), and the run's
  language and names as the job decides them."""
  kinds = dict.fromkeys(paths, "wikipedia")
  wikis = pipeline.wikis(paths, kinds, CorpusConfig(language=language))
  pages = []
  for index, path in enumerate(paths):
    for unit in sources.plan_units(index, path, "wikipedia",
                                   hidden_names=wikis.hidden_names[path]):
      pages += [doc.text.decode("utf-8").split("\n")[:-2]
                for doc in units.process_unit(unit, wikis.config).documents]
  return pages, wikis


def _passages(text: str, siteinfo, language=None) -> list[str]:
  """The passages of one page of a dump behind `siteinfo`."""
  names = namespaces.hidden_names((language or siteinfo[0], siteinfo[0]),
                                  siteinfo[2].values())
  return wikitext.passages(wikitext.parse(text, wikitext.hidden_link_test(names)))


def test_german_and_chinese_files_and_categories_leave_nothing_under_any_name():
  # The examples: Datei (the siteinfo's), Bild (an alias only the table knows), File
  # (English), captions with links in them; Kategorie, Category; interlanguage links.
  assert _passages(BERLIN, GERMAN_SITEINFO) == BERLIN_TEXT
  assert _passages(BEIJING, CHINESE_SITEINFO) == BEIJING_TEXT
  # Names as MediaWiki matches them: any case, `_` for a space (Vietnamese "Tập tin").
  vietnamese = ("vi", "viwiki", {6: "Tập tin", 14: "Thể loại"})
  assert _passages("[[tập_tin:Hà Nội.jpg|nhỏ|Hồ Gươm]]Hà Nội là thủ đô.[[Hình:x.png|y]]"
                   "[[THỂ LOẠI:Thủ đô]]", vietnamese) == ["Hà Nội là thủ đô."]


def test_a_file_under_another_wikis_name_is_hidden_by_its_file_name():
  # Russian text behind English Wikipedia's <siteinfo> (the shared ru minidump's "Berlin"):
  # Файл is Russian's (and Bulgarian's, Ukrainian's...) name for files.
  text = ("[[Файл:Berlin Mauer 1961.jpg|thumb|200px|Берлинская стена.]]Берлин — столица "
          "Германии.[[Imagine: John Lennon]] — фильм.[[Fil:Plan.SVG ]][[Kategorie:Berlin]]")
  assert _passages(text, ENGLISH_SITEINFO) == [
      "Берлин — столица Германии.Imagine: John Lennon — фильм.Kategorie:Berlin"]


def test_a_dump_with_its_own_siteinfo_needs_no_flag(tmp_path):
  german = _dump(tmp_path, "dewiki", GERMAN_SITEINFO, [(1, "Berlin", BERLIN)], compress=True)
  chinese = _dump(tmp_path, "zhwiki", CHINESE_SITEINFO, [(2, "北京市", BEIJING)])
  assert sources.read_siteinfo(german) == sources.Siteinfo(
      "de", "dewiki", ("Medium", "Datei", "Kategorie"))
  multistream = _multistream(tmp_path, GERMAN_SITEINFO, [(1, "Berlin", BERLIN)])
  for dump in (german, multistream):
    pages, wikis = _clean([dump])
    assert wikis.config.language == "de" and not wikis.warnings
    assert " ".join(pages[0]) == " ".join(BERLIN_TEXT)
  pages, wikis = _clean([chinese])
  # (Joined: however a splitter cuts Chinese, its sentences make the page's text.)
  assert wikis.config.language == "zh" and ["".join(pages[0])] == BEIJING_TEXT
  # Two languages, no flag: the first dump's, said; each dump's names still its own.
  pages, wikis = _clean([german, chinese])
  assert wikis.config.language == "de" and ["".join(pages[1])] == BEIJING_TEXT
  assert wikis.warnings == ["the dumps' <siteinfo>s name 2 languages (de, zh): the text taken "
                            "as de; give --language, or one run a language"]


def test_language_over_an_english_siteinfo_wins_and_is_logged(tmp_path, caplog):
  # As the shared minidumps: German article text behind English Wikipedia's <siteinfo>.
  dump = _dump(tmp_path, "minidump", ENGLISH_SITEINFO, [(1, "Berlin", BERLIN)])
  leaked, wikis = _clean([dump])
  assert wikis.config.language == "en"  # the siteinfo's: the German names are not known,
  # but for files, known by their file names under any wiki's name (Datei, Bild): the
  # category's sort key is what shows.
  assert leaked[0] == BERLIN_TEXT + ["Stadt in Deutschland"]
  with caplog.at_level(logging.WARNING):
    pages, wikis = _clean([dump], language="de")
  assert wikis.config.language == "de"
  assert " ".join(pages[0]) == " ".join(BERLIN_TEXT)
  assert wikis.warnings == [f"--language=de over {dump}'s <siteinfo> (en): the text taken as "
                            "de, files and categories hidden under both wikis' names"]
  assert wikis.warnings[0] in caplog.text


def test_a_language_without_a_table_row_keeps_the_siteinfo_and_english_names(tmp_path):
  # Wu Chinese (wuuwiki) has no row: its siteinfo's names and English ones still apply, and
  # the run says the aliases are unknown.
  wu = ("wuu", "wuuwiki", {6: "文件", 14: "分类"})
  text = "[[文件:上海.jpg|缩略图|外滩]]上海是一座城市。[[File:x.png|y]][[分类:城市]]"
  dump = _dump(tmp_path, "wuuwiki", wu, [(1, "上海", text)])
  pages, wikis = _clean([dump])
  assert "".join(pages[0]) == "上海是一座城市。" and wikis.config.language == "wuu"
  assert wikis.warnings == [f"language wuu: no row in {namespaces.TABLE}: files and "
                            "categories are hidden under the dumps' <siteinfo> names and "
                            "English ones"]
  # The table's row for the dump's own language counts where the flag has none ("nb":
  # Norwegian Bokmål, whose wiki is "no").
  norwegian = _dump(tmp_path, "nowiki", ("nb", "nowiki", {6: "Fil", 14: "Kategori"}),
                    [(2, "Oslo", "[[Bilde:Oslo.jpg|mini|Oslo]]Oslo er hovedstaden.")])
  pages, wikis = _clean([norwegian])
  assert pages == [["Oslo er hovedstaden."]] and not wikis.warnings


def test_right_to_left_and_mixed_script_text_passes_through_unharmed(tmp_path):
  # Arabic and Hebrew prose, right-to-left marks, Latin and digits inside; the files under
  # the Arabic wiki's alias صورة and its name ملف, a category under تصنيف.
  arabic = ("[[ملف:Berlin.jpg|تصغير|يسار|برلين]]'''برلين''' هي عاصمة [[ألمانيا]] "
            "(Berlin)\u200f، ويبلغ عدد سكانها 3.7 مليون نسمة.[[صورة:x.png|تصغير|y]] "
            "تُكتب בערלין بالعبرية و Берлин بالروسية.\n[[تصنيف:عواصم]]\n[[en:Berlin]]")
  hebrew = ("[[קובץ:Berlin.jpg|ממוזער|ברלין]]'''ברלין''' היא בירת [[גרמניה]] (Germany). "
            "[[קטגוריה:ערים]]")
  pages, _ = _clean([_dump(tmp_path, "arwiki", ("ar", "arwiki", {6: "ملف", 14: "تصنيف"}),
                           [(1, "برلين", arabic)]),
                     _dump(tmp_path, "hewiki", ("he", "hewiki", {6: "קובץ", 14: "קטגוריה"}),
                           [(2, "ברלין", hebrew)])], language="ar")
  assert " ".join(pages[0]) == ("برلين هي عاصمة ألمانيا (Berlin)\u200f، ويبلغ عدد سكانها 3.7 "
                                "مليون نسمة. تُكتب בערלין بالعبرية و Берлин بالروسية.")
  assert " ".join(pages[1]) == "ברלין היא בירת גרמניה (Germany)."


def test_the_command_line_language_flag(tmp_path):
  """--language through the console script: a German run over an English siteinfo (the
  warning on stderr, the language in the stats), and a bad code refused in one line."""
  dump = _dump(tmp_path, "minidump", ENGLISH_SITEINFO, [(1, "Berlin", BERLIN)], compress=True)
  out = tmp_path / "out" / "corpus.txt"
  common = [f"--input_file={dump}", f"--output_file={out}", "--num_workers=1"]
  good, bad = run_cases("data_gen.prepare_corpus", [common + ["--language=de"],
                                                     common + ["--language=Deutsch"]])
  assert good.returncode == 0, good.stderr
  assert "--language=de over" in good.stderr
  with open(out, encoding="utf-8") as f:
    assert "mini" not in f.read()
  assert bad.returncode == 1 and "Traceback" not in bad.stderr
  assert bad.stderr.strip().splitlines()[-1] == (
      "prepare_corpus: error: --language=Deutsch: not a language code (en, de, zh, zh-yue: "
      "lower case, as Wikipedia's dumps name them)")


@pytest.mark.parametrize("dbname, code", [("dewiki", "de"), ("zh_yuewiki", "zh-yue"),
                                          ("commonswiki", "commons"), ("wiki", None),
                                          (None, None)])
def test_a_dbname_names_its_wiki(dbname, code):
  assert namespaces.wiki_code(dbname) == code
