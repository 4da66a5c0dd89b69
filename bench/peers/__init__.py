"""The peers of the durable-engine benchmark (``bench/engine_bench.py``).

Each module here is run as its own process by the benchmark: the raw psycopg loop, the
django-tasks-db settings and task, the Procrastinate app, and the Acurio engine's no-op
workflow. None of them is imported by the application.
"""
