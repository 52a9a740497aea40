"""bert_tf's entry points: flags → arguments → one library call. cli.py holds the flags they
share; each script defines its own at import, so no module imports two of them."""
