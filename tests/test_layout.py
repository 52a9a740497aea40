"""The house's picture (DESIGN.md), held module by module. Each arrow is an import, wherever it
sits (top level or inside a function):

  common ← records, text ← model ← training ← finetuning ← tasks    ← scripts
                                               finetuning ← export   ← scripts
  common ←                data_gen jobs ← corpus           ← data_gen   (corpus: no TensorFlow)
  common ← records, text, data_gen jobs ← pretraining data ← data_gen

- a module imports only modules of its own room or of the rooms its room may import (ROOMS);
- no import cycle between modules;
- no module imports another module's private (_underscored) name;
- a task (a module or folder under bert_tf/tasks/) imports the framework (bert_tf.finetuning)
  and the rooms below it, never another task: a task is one file or folder that stands alone;
  the framework and export import no task at all (their rooms), nor do the flags (cli.py);
- every folder of a package has an __init__.py (setup.cfg's `packages = find:` drops the
  folder from the wheel otherwise, while the tests still pass from the source tree);
- no benchmark flag defaults to a machine's path: the peer's python is benchmarks/
  peer_python.py's ($BERT_TF_PEER_PYTHON), the data root data_root.py's ($BERT_TF_DATA), the
  scratch folder scratch.py's ($BERT_TF_SCRATCH or the temporary folder).
"""
import ast
import collections
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("bert_tf", "export", "tfrecords", "data_gen")
# Module prefix -> room, the longest prefix first. The package's own __init__ (the public,
# lazy API) is a room of its own.
ROOMS = {
    "bert_tf.common": "common",        # errors, atomic files, the output lock: no TensorFlow
    "tfrecords": "records",            # record layouts, readers, writers
    "bert_tf.tokenization": "text",    # the one tokenizer
    "bert_tf.modeling": "model",       # config, encoder, heads, task models, checkpoints
    "bert_tf.training": "training",    # the loop, optimizers, strategies, pretraining
    "bert_tf.finetuning": "finetuning",  # the interface, the runner, what the tasks share
    "bert_tf.tasks": "tasks",          # the fine-tuning tasks, one module or folder each
    "export": "export",                # SavedModels for TF Serving
    "bert_tf.scripts": "scripts",      # bert_tf's entry points
    "data_gen.jobs": "data_gen jobs",  # what both jobs run on: launch, workers, output files
    "data_gen.corpus": "corpus",       # prepare_corpus: raw sources -> one sentence a line
    "data_gen.pretraining_data": "pretraining data",  # create_pretraining_data's records
    "data_gen": "data_gen",            # the entry points, vocab learning, the sample corpus
    "bert_tf": "package",
}
MAY_IMPORT = {
    "common": set(),
    "records": {"common"},
    "text": {"common"},
    "model": {"common"},
    "training": {"common", "records", "text", "model"},
    "finetuning": {"common", "records", "text", "model", "training"},
    "tasks": {"common", "records", "text", "model", "training", "finetuning"},
    "export": {"common", "records", "text", "model", "training", "finetuning"},
    "scripts": {"common", "records", "text", "model", "training", "finetuning", "tasks",
                "export"},
    "data_gen jobs": {"common"},
    "corpus": {"common", "data_gen jobs"},
    "pretraining data": {"common", "records", "text", "data_gen jobs"},
    "data_gen": {"common", "records", "text", "data_gen jobs", "corpus", "pretraining data"},
    "package": {"model"},
}
# Modules above the framework that still must name no task: the flags the run_* scripts share.
NAMES_NO_TASK = {"bert_tf.scripts.cli"}


def room(module: str) -> str:
  for prefix in sorted(ROOMS, key=len, reverse=True):
    if module == prefix or module.startswith(prefix + "."):
      return ROOMS[prefix]
  raise AssertionError(f"{module}: in no room of tests/test_layout.py's ROOMS")


def modules(root: str = ROOT) -> dict[str, str]:
  """module name -> file, for every module of the project's packages."""
  found = {}
  for package in PACKAGES:
    for folder, _, files in os.walk(os.path.join(root, package)):
      for name in (f for f in files if f.endswith(".py")):
        path = os.path.join(folder, name)
        parts = os.path.relpath(path, root)[:-3].split(os.sep)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
  return found


def imports(root: str = ROOT) -> list[tuple[str, int, str, str]]:
  """(module, line, imported module, imported name or "") for every project import."""
  known = modules(root)

  def resolve(name: str) -> str:
    while name not in known and "." in name:
      name = name.rpartition(".")[0]
    return name

  found = []
  for module, path in sorted(known.items()):
    with open(path, encoding="utf-8") as f:
      tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
      if isinstance(node, ast.Import):
        found += [(module, node.lineno, resolve(a.name), "") for a in node.names
                  if a.name.split(".")[0] in PACKAGES]
      elif (isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and
            node.module.split(".")[0] in PACKAGES):
        for alias in node.names:
          full = f"{node.module}.{alias.name}"
          found.append((module, node.lineno, full, "") if full in known else
                       (module, node.lineno, resolve(node.module), alias.name))
  return found


def where(module: str, line: int) -> str:
  return f"{module.replace('.', '/')}.py:{line}"


def against_the_flow(root: str = ROOT) -> list[str]:
  return [f"{where(m, line)}: {room(m)} imports {room(target)} ({target})"
          for m, line, target, _ in imports(root)
          if room(target) != room(m) and room(target) not in MAY_IMPORT[room(m)]]


def private_imports(root: str = ROOT) -> list[str]:
  """`from m import _name`, and `m._name` where m is an imported project module."""
  known = modules(root)
  found = [f"{where(m, line)}: imports {target}.{name}" for m, line, target, name in imports(root)
           if name.startswith("_") and target != m]
  for module, path in sorted(known.items()):
    with open(path, encoding="utf-8") as f:
      tree = ast.parse(f.read(), path)
    aliases = {}  # local name -> project module
    for node in ast.walk(tree):
      if isinstance(node, ast.Import):
        aliases.update({a.asname: a.name for a in node.names if a.asname and a.name in known})
      elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        aliases.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names
                        if f"{node.module}.{a.name}" in known})
    for node in ast.walk(tree):
      if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and
          node.value.id in aliases and node.attr.startswith("_") and
          not node.attr.startswith("__")):
        found.append(f"{where(module, node.lineno)}: uses {aliases[node.value.id]}.{node.attr}")
  return found


def cycles(root: str = ROOT) -> list[list[str]]:
  """The module import graph's strongly connected components of more than one module."""
  graph = collections.defaultdict(set)
  for m, _, target, _ in imports(root):
    if target != m:
      graph[m].add(target)
  index, low, stack, on_stack, found = {}, {}, [], set(), []

  def visit(v):  # Tarjan's algorithm.
    index[v] = low[v] = len(index)
    stack.append(v)
    on_stack.add(v)
    for w in sorted(graph[v]):
      if w not in index:
        visit(w)
        low[v] = min(low[v], low[w])
      elif w in on_stack:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      component = []
      while True:
        w = stack.pop()
        on_stack.discard(w)
        component.append(w)
        if w == v:
          break
      if len(component) > 1:
        found.append(sorted(component))

  for v in sorted(modules(root)):
    if v not in index:
      visit(v)
  return found


def task_of(module: str) -> str | None:
  """The task a module belongs to: bert_tf.tasks.<task> and everything under it."""
  parts = module.split(".")
  return parts[2] if parts[:2] == ["bert_tf", "tasks"] and len(parts) > 2 else None


def task_borrowings(root: str = ROOT) -> list[str]:
  """Imports of a task's module by another task, or by a module that must name no task."""
  problems = []
  for m, line, target, _ in imports(root):
    owner, wanted = task_of(m), task_of(target)
    if wanted is None or owner == wanted:
      continue
    if owner is not None:
      problems.append(f"{where(m, line)}: the {owner} task imports {target}")
    elif m in NAMES_NO_TASK:
      problems.append(f"{where(m, line)}: {m} names a task ({target})")
  return problems


def folders_without_init(root: str = ROOT) -> list[str]:
  return [os.path.relpath(folder, root) for package in PACKAGES
          for folder, _, files in os.walk(os.path.join(root, package))
          if "__pycache__" not in folder and any(f.endswith(".py") for f in files) and
          "__init__.py" not in files]


def machine_paths_in_benchmarks(root: str) -> list[str]:
  """benchmarks/ lines that define --peer_python themselves, or default a flag to an absolute
  path: paths come from benchmarks/peer_python.py, data_root.py and scratch.py."""
  found = []
  paths = [os.path.join(folder, name)
           for folder, _, files in os.walk(os.path.join(root, "benchmarks"))
           for name in files if name.endswith(".py") and name != "peer_python.py"]
  for path in sorted(paths):
    with open(path, encoding="utf-8") as f:
      for n, line in enumerate(f, 1):
        if ('"--peer_python"' in line or re.search(r'default="/', line) or
            re.search(r'(DEFINE_\w+|set_default)\("\w+",\s*"/', line)):
          found.append(f"{os.path.relpath(path, root)}:{n}: {line.strip()}")
  return found


def test_no_benchmark_flag_defaults_to_a_machine_path():
  assert machine_paths_in_benchmarks(ROOT) == []


def test_no_import_runs_against_the_flow():
  assert against_the_flow() == []


def test_no_import_cycle():
  assert cycles() == []


def test_no_private_name_is_imported_across_modules():
  assert private_imports() == []


def test_a_task_imports_only_the_shared_task_modules():
  assert task_borrowings() == []


def test_every_package_folder_is_a_package():
  assert folders_without_init() == []


def test_each_check_finds_what_it_looks_for(tmp_path):
  files = {
      "bert_tf/__init__.py": "",
      "bert_tf/common/__init__.py": "",
      "bert_tf/common/ok.py": "import os\n",
      "bert_tf/modeling/__init__.py": "",
      "bert_tf/modeling/up.py": "def f():\n  from bert_tf.finetuning import runner\n  return runner\n",
      "bert_tf/modeling/a.py": "from bert_tf.modeling import b\n",
      "bert_tf/modeling/b.py": "from bert_tf.modeling.a import _helper\n",
      "bert_tf/modeling/c.py": "from bert_tf.modeling import a\nx = a._helper\n",
      "bert_tf/finetuning/__init__.py": "",
      "bert_tf/finetuning/runner.py": "",
      "bert_tf/tasks/__init__.py": "",
      "bert_tf/tasks/one/__init__.py": "",
      "bert_tf/tasks/one/task.py": "from bert_tf.tasks.one import serving\n"
                                   "from bert_tf.tasks import two\n"
                                   "from bert_tf.finetuning import runner\n",
      "bert_tf/tasks/one/serving.py": "",
      "bert_tf/tasks/two.py": "",
      "bert_tf/scripts/__init__.py": "",
      "bert_tf/scripts/cli.py": "from bert_tf.tasks.one import task\n",
      "bert_tf/scripts/run_one.py": "from bert_tf.tasks.one import task\n",
      "export/__init__.py": "", "tfrecords/__init__.py": "", "data_gen/__init__.py": "",
      "data_gen/corpus/__init__.py": "", "data_gen/pretraining_data/__init__.py": "",
      "data_gen/corpus/x.py": "from data_gen.pretraining_data import y\n",
      "data_gen/pretraining_data/y.py": "",
      "tfrecords/loose/x.py": "",
      "benchmarks/peers/x.py": 'p.add_argument("--peer_python", default="/tmp/v/bin/python")\n'
                               'p.add_argument("--work_dir", default="/tmp/w")\n'
                               'flags.DEFINE_string("output_dir", "/tmp/o", "Output.")\n'
                               'flags.DEFINE_string("model", "minilm", "A name.")\n'
                               'FLAGS.set_default("output_dir", "/tmp/t")\n',
  }
  for name, text in files.items():
    os.makedirs(os.path.dirname(tmp_path / name), exist_ok=True)
    (tmp_path / name).write_text(text)
  root = str(tmp_path)
  assert against_the_flow(root) == [
      "bert_tf/modeling/up.py:2: model imports finetuning (bert_tf.finetuning.runner)",
      "data_gen/corpus/x.py:1: corpus imports pretraining data (data_gen.pretraining_data.y)"]
  assert cycles(root) == [["bert_tf.modeling.a", "bert_tf.modeling.b"]]
  assert private_imports(root) == ["bert_tf/modeling/b.py:1: imports bert_tf.modeling.a._helper",
                                   "bert_tf/modeling/c.py:2: uses bert_tf.modeling.a._helper"]
  assert task_borrowings(root) == [
      "bert_tf/scripts/cli.py:1: bert_tf.scripts.cli names a task (bert_tf.tasks.one.task)",
      "bert_tf/tasks/one/task.py:2: the one task imports bert_tf.tasks.two"]
  assert folders_without_init(root) == ["tfrecords/loose"]
  assert machine_paths_in_benchmarks(root) == [
      'benchmarks/peers/x.py:1: p.add_argument("--peer_python", default="/tmp/v/bin/python")',
      'benchmarks/peers/x.py:2: p.add_argument("--work_dir", default="/tmp/w")',
      'benchmarks/peers/x.py:3: flags.DEFINE_string("output_dir", "/tmp/o", "Output.")',
      'benchmarks/peers/x.py:5: FLAGS.set_default("output_dir", "/tmp/t")']
