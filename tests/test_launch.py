"""data_gen.jobs.launch: the launch flags both data-generation jobs share, checked and started."""
import os

from absl import flags
import pytest

from data_gen.jobs import launch


@pytest.mark.parametrize("runner, num_workers, beam_args, message", [
    (None, None, ["--direct_num_workers=2"],
     "unexpected arguments --direct_num_workers=2 (Beam pipeline options go with --runner)"),
    ("FnApiRunner", 2, [], "--num_workers is for the local worker processes; with --runner"),
    (None, 0, [], "--num_workers=0: must be >= 1"),
    ("FnApiRunner", None, ["--direct_num_workerz=2"],
     "--direct_num_workerz: neither a flag of some_job nor a Beam pipeline option"),
])
def test_a_mistake_names_the_flag(runner, num_workers, beam_args, message):
  with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
    launch.start("some_job", runner, num_workers, beam_args)


def test_without_a_runner_the_workers_are_started_and_answer():
  launched = launch.start("some_job", None, 2, [])
  with launched.workers as pool:
    assert launched.options is None and launched.num_workers == 2
    pids = {pool.submit(os.getpid).result() for _ in range(8)}
  assert os.getpid() not in pids and 1 <= len(pids) <= 2


def test_the_default_is_one_worker_a_core():
  launched = launch.start("some_job", None, None, [])
  with launched.workers:
    assert launched.num_workers == len(os.sched_getaffinity(0))


def test_with_a_runner_there_are_beam_options_and_no_workers():
  launched = launch.start("some_job", "FnApiRunner", None, ["--direct_num_workers=2"])
  assert launched.workers is None
  assert launched.options.get_all_options()["direct_num_workers"] == 2
  assert launched.options.get_all_options()["runner"] == "FnApiRunner"


def test_an_unknown_flag_exits_with_one_line_naming_the_program():
  values = flags.FlagValues()
  flags.DEFINE_integer("num_workers", None, "", flag_values=values)
  assert launch.parse_flags(values, ["prog", "--num_workers=3", "--runner_opt=1"],
                            "some_job") == ["prog", "--runner_opt=1"]
  assert values.num_workers == 3
  with pytest.raises(SystemExit, match="^some_job: error: .*num_workers"):
    launch.parse_flags(values, ["prog", "--num_workers=three"], "some_job")
