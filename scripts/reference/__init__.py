"""The PyTorch reference harness of hetplan (scripts/reference_train.py, docs/measure.md)."""
