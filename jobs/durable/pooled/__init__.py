"""PostgreSQL through a transaction pooler: Django's backend, with session settings applied per
transaction (``ENGINE = "jobs.durable.pooled"``; ``DATABASE_POOLER=transaction`` selects it).

A transaction pooler (PgBouncer with ``pool_mode = transaction``) hands each transaction to
whichever server connection is free, so a plain ``SET`` lands on a connection other clients
share next and is gone for this client's next transaction. This backend sets nothing on the
session: each transaction Django opens (the outermost ``atomic``) starts with
``set_config(name, value, true)`` for the connection's :attr:`DatabaseWrapper.transaction_settings`,
which end with the transaction, on the very server connection that runs it. What a process
puts there is :mod:`jobs.durable.sessions`' business.
"""
