"""The Acurio app: analysis jobs, report runs, the durable pipeline, worker and sweeper."""
