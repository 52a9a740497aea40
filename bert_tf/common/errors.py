"""The errors a user can cause, and the one-line exit every entry point gives them.

A user's mistake or the machine's state (a bad flag, a missing or unreadable file, a full or
read-only disk, a damaged checkpoint) ends a job as `<program>: error: <message>` and exit
status 1, never a traceback; anything else is a bug and keeps its traceback.
"""
import contextlib
import re
import sys


class DataError(ValueError):
  """Bad input data; the message names the file (and line or example id, where there is one)."""


# Besides TensorFlow's own (tf.errors.OpError: a path it cannot read or write, a full disk).
USER_ERRORS = (ValueError, OSError, FloatingPointError)


def _op_error(error: BaseException) -> bool:
  """Whether `error` is TensorFlow's OpError; looked up only when TensorFlow is loaded (no
  error of it can exist before)."""
  tf = sys.modules.get("tensorflow")
  return tf is not None and isinstance(error, tf.errors.OpError)


def is_user_error(error: BaseException) -> bool:
  """Whether `error` is a user's (or the machine's), not a bug."""
  return isinstance(error, USER_ERRORS) or _op_error(error)


def message(error: BaseException) -> str:
  """The error's message. A TensorFlow error loses the graph's function and op names around
  it: `{{function_node __wrapped__SaveV2_...}} PATH; No space left on device [Op:SaveV2]` ->
  `PATH; No space left on device`."""
  if not _op_error(error):
    return str(error)
  text = re.sub(r"^\{\{function_node [^}]*\}\}\s*", "", error.message)
  return re.sub(r"\s*\[Op:\w+\]( name: \S*)?$", "", text)


@contextlib.contextmanager
def exit_on_user_error(program: str):
  """Turns a user's error inside the block into one line `<program>: error: <message>` and
  exit status 1, instead of a traceback; anything else (a bug) still shows its traceback."""
  try:
    yield
  except Exception as e:  # pylint: disable=broad-except  (re-raised unless a user's)
    if not is_user_error(e):
      raise
    sys.exit(f"{program}: error: {message(e)}")
