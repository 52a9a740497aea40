"""The ground floor: what every room of the house uses, data_gen's workers and tfrecords too.

  errors.py       user errors and the one-line exit every entry point ends with
  files.py        a file written whole or not at all (a temporary name, renamed when complete);
                  the files an --input_file's globs name
  output_lock.py  one job per output, and no output that is one of the job's inputs
  json_config.py  settings dataclasses' JSON, an unknown key refused
  progress.py     long work's progress line, at least every 30 s

No TensorFlow at import: data_gen starts its worker processes before TensorFlow loads, and a
job that only refuses its flags should not pay for it. tf.io.gfile is imported where it is used,
for a path of its other file systems (gs://): a local one goes through the standard library.
"""
