"""Acurio: citation verification for academic theses on a durable PostgreSQL pipeline."""
