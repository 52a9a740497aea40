"""One job per output: a second job refuses at once, naming the first; a killed holder frees
the lock; output file prefixes lock apart; create_pretraining_data takes its prefix's lock."""
import os
import subprocess
import sys

import pytest

from bert_tf.common import output_lock
from toys import VOCAB

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
HOLD = ("import sys, time\n"
        "from bert_tf.common import output_lock\n"
        "with output_lock.lock_output_dir(sys.argv[1]):\n"
        "  print('held', flush=True)\n"
        "  time.sleep(600)\n")


@pytest.mark.slow
def test_a_second_job_is_refused_until_the_holder_is_killed(tmp_path):
  out = str(tmp_path / "out")
  holder = subprocess.Popen([sys.executable, "-c", HOLD, out], stdout=subprocess.PIPE,
                            text=True, env=ENV)
  try:
    assert holder.stdout.readline() == "held\n"
    with pytest.raises(output_lock.OutputBusyError) as refused:
      with output_lock.lock_output_dir(out):
        pass
  finally:
    holder.kill()  # SIGKILL: no cleanup runs in the holder.
    holder.wait()
  message = str(refused.value)
  assert message.startswith(f"{out}: another job is writing there: pid {holder.pid} on ")
  assert ", started 20" in message and f"its lock is {out}/.lock" in message

  assert os.path.exists(os.path.join(out, ".lock"))  # Left by the killed job, but free.
  with output_lock.lock_output_dir(out):
    pass
  assert os.listdir(out) == []  # A clean release removes it.


def test_prefixes_in_one_folder_lock_apart(tmp_path):
  first, second = str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")
  with output_lock.lock_output_files([first]):
    with output_lock.lock_output_files([second]):
      assert sorted(os.listdir(tmp_path)) == [".a.tfrecord.lock", ".b.tfrecord.lock"]
    # Not re-entrant: the same prefix again (a second job, or a thread) is refused.
    with pytest.raises(output_lock.OutputBusyError, match=f"pid {os.getpid()} "):
      with output_lock.lock_output_files([second, first]):
        pass
    assert os.listdir(tmp_path) == [".a.tfrecord.lock"]  # b's lock, taken first, was freed.


def test_a_folder_the_job_made_and_left_empty_is_removed(tmp_path):
  out = tmp_path / "new" / "out"
  with pytest.raises(ValueError, match="refused"):
    with output_lock.lock_output_dir(str(out)):
      assert out.is_dir()
      raise ValueError("refused before it wrote anything")
  assert os.listdir(tmp_path) == []  # Both folders it made.
  with output_lock.lock_output_files([str(out / "pretrain.tfrecord")]):
    (out / "pretrain.tfrecord").write_text("")
  assert os.listdir(out) == ["pretrain.tfrecord"]  # It holds the job's output.
  # A folder the job did not make stays, empty as it was: the user's.
  mine = tmp_path / "mine"
  os.makedirs(mine)
  with output_lock.lock_output_dir(str(mine)):
    pass
  assert os.listdir(mine) == []


def test_outputs_that_are_no_local_path_go_unlocked(tmp_path):
  with output_lock.lock_output_dir("ram://out"):
    with output_lock.lock_output_dir("ram://out"):
      pass


@pytest.mark.slow
def test_create_pretraining_data_refuses_while_another_job_writes_its_prefix(tmp_path):
  (tmp_path / "corpus.txt").write_text("One sentence here.\nAnother one.\n\nA document.\n")
  prefix = str(tmp_path / "out" / "pretrain.tfrecord")
  with output_lock.lock_output_files([prefix]):
    result = subprocess.run(
        [sys.executable, "-m", "data_gen.create_pretraining_data",
         f"--input_file={tmp_path / 'corpus.txt'}", f"--output_file={prefix}",
         f"--vocab_file={VOCAB}", "--num_workers=1"],
        capture_output=True, text=True, timeout=900, env=ENV)
    assert os.listdir(tmp_path / "out") == [".pretrain.tfrecord.lock"]  # Ours: nothing written.
  assert result.returncode == 1
  [error] = [l for l in result.stderr.splitlines()
             if l.startswith("create_pretraining_data: error: ")]
  assert error.startswith(f"create_pretraining_data: error: {prefix}: another job is writing "
                          f"there: pid {os.getpid()} on "), error
  assert f"its lock is {tmp_path}/out/.pretrain.tfrecord.lock" in error
