"""What both data_gen jobs run on: their launch (local workers or a Beam runner), the worker
pool, Beam's options, and the shard, scratch and stats files they write. No TensorFlow at
import: prepare_corpus never loads it, and create_pretraining_data starts its workers before
it does."""
