"""The house's one-way flow (DESIGN.md): tfrecords <- bert_tf <- data_gen / export. Each arrow is
an import; a module that imports a package above its own fails here, wherever the import sits
(top level or inside a function)."""
import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Package -> the project packages it may import (besides itself).
ALLOWED = {
    "tfrecords": set(),
    "bert_tf": {"tfrecords"},
    "data_gen": {"bert_tf", "tfrecords"},
    "export": {"bert_tf", "tfrecords"},
}


def _imports(path: str) -> list[tuple[int, str]]:
  """(line, top-level package) of every import statement in the file."""
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read(), path)
  found = []
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      found.append((node.lineno, node.module.split(".")[0]))
  return found


def upward_imports(root: str = ROOT) -> list[str]:
  """`file:line: package imports package` for each import against the flow."""
  problems = []
  for package, allowed in ALLOWED.items():
    for folder, _, files in os.walk(os.path.join(root, package)):
      for name in sorted(f for f in files if f.endswith(".py")):
        path = os.path.join(folder, name)
        for line, imported in _imports(path):
          if imported in ALLOWED and imported != package and imported not in allowed:
            problems.append(f"{os.path.relpath(path, root)}:{line}: {package} imports {imported}")
  return problems


def test_no_import_runs_against_the_flow():
  assert upward_imports() == []


def test_the_check_finds_an_upward_import(tmp_path):
  for package in ALLOWED:
    os.makedirs(tmp_path / package)
  (tmp_path / "bert_tf" / "ok.py").write_text("import tfrecords.schema\nimport numpy\n")
  (tmp_path / "bert_tf" / "bad.py").write_text(
      "def f():\n  from export import saved_model\n  return saved_model\n")
  (tmp_path / "tfrecords" / "bad.py").write_text("import os\nimport bert_tf.tasks\n")
  assert sorted(upward_imports(str(tmp_path))) == [
      "bert_tf/bad.py:2: bert_tf imports export", "tfrecords/bad.py:2: tfrecords imports bert_tf"]
