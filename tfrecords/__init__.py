"""Record layouts, and the tf.data readers and writers for them: the project's ground floor.

Imports TensorFlow only; every other package reads and writes records through here.
"""
