"""A durable-workflow engine on PostgreSQL (see DESIGN.md, "The durable engine")."""
