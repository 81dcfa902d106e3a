"""The model evaluation: task success through toolbridge against a real local model (`python -m bench.eval`)."""
