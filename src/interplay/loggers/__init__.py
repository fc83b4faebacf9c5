"""Where metrics rows go: console, metrics.jsonl, TensorBoard, curves."""
