"""create_pretraining_data: one sentence a line -> masked LM / next sentence TFRecords."""
