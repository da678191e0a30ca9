"""Importers of existing logs (nvidia-smi CSV) into the lake."""
