"""prepare_corpus: raw sources (Wikipedia dumps, WikiExtractor output, books, paragraphs) ->
create_pretraining_data's input, one sentence a line. No TensorFlow, in any of its processes."""
