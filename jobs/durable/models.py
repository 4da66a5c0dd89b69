"""Storage of the durable engine: workflow instances and their step checkpoints."""
