"""What a run keeps on disk and how it guards it: checkpoints and their codec, the checks
before a checkpoint is loaded, the run folder's lock, trust in code a config names, and the
signals that end a run in a checkpoint."""
